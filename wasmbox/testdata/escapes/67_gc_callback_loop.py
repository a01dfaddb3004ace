# expect: timeout
# Loops in a gc callback triggered while unwinding.
import gc
def cb(phase, info):
    while True:
        pass
gc.callbacks.append(cb)
try:
    while True:
        pass
finally:
    gc.collect()
