# expect: timeout
import time
time.sleep(30)
print("woke up")
