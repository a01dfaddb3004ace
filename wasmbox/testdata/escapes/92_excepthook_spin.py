# expect: timeout
# sys.excepthook is called for an uncaught exception; one that never returns is killed on the run's deadline.
import sys


def hook(*args):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


sys.excepthook = hook
raise ValueError("into the hook")
