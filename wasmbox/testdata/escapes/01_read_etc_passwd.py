# expect: contained
try:
    open("/etc/passwd").read()
    print("ESCAPED")
except OSError:
    print("CONTAINED")
