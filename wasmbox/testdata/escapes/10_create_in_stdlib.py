# expect: contained
try:
    open("/usr/local/lib/python3.13/evil.py", "w").write("x")
    print("ESCAPED")
except OSError:
    print("CONTAINED")
