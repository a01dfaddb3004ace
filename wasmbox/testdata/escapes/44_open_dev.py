# expect: contained
for p in ("/dev/null", "/dev/urandom", "/dev/tty", "/dev/sda"):
    try:
        open(p, "rb")
        print("ESCAPED", p)
        break
    except OSError:
        pass
else:
    print("CONTAINED")
