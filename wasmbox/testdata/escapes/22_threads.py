# expect: contained
import threading
try:
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    print("ESCAPED")
except RuntimeError:
    print("CONTAINED")
