# expect: timeout
# A global's finalizer runs when the program ends (its __main__ globals are released); one that never returns
# is killed on the run's deadline.
class Forever:
    def __del__(self):
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass


keep = Forever()
print("main done")
