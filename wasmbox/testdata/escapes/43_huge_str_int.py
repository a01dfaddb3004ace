# expect: contained
import sys
try:
    int("9" * 100000)
    print("ESCAPED")
except ValueError:
    print("CONTAINED")
