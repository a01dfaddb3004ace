# expect: timeout
while True:
    pass
