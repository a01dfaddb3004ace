# expect: contained
try:
    import multiprocessing
    p = multiprocessing.Process(target=print)
    p.start()
    print("ESCAPED")
except Exception:
    print("CONTAINED")
