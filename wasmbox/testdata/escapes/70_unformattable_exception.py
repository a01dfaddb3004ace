# expect: contained
# An exception whose str() fails and whose message is huge: the run still ends with a bounded report.
print("CONTAINED")
class E(Exception):
    def __str__(self):
        raise RuntimeError("no str")
try:
    raise ValueError("x" * (4 << 20))
except ValueError:
    raise E()
