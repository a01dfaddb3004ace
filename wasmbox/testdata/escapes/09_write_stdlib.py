# expect: contained
try:
    with open("/usr/local/lib/python3.13/os.py", "w") as f:
        f.write("pwned")
    print("ESCAPED")
except OSError:
    print("CONTAINED")
