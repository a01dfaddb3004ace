# expect: timeout
# Loops in a finalizer that runs only after the traceback has been formatted.
class D:
    def __del__(self):
        while True:
            pass
def f():
    d = D()
    while True:
        pass
f()
