# expect: timeout_or_memory
x = 7 ** (10 ** 9)
