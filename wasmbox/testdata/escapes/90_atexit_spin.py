# expect: timeout
# The end of a program runs its atexit callbacks inside the run's deadline: one that never returns (and
# swallows the KeyboardInterrupt the deadline raises) is killed on time like any other code.
import atexit


@atexit.register
def spin():
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


print("main done")
