# expect: contained
# Without Program.Stdin, stdin is at end of file for read(), os.read and select.
import os, select, sys
r, _, _ = select.select([sys.stdin], [], [], 5)
if sys.stdin.read() == "" and os.read(0, 10) == b"":
    print("CONTAINED")
