# expect: timeout
# Claims to be unwinding, again and again, from its KeyboardInterrupt handler: the host's kill grace is fixed.
import _wasmbox
try:
    while True:
        pass
except KeyboardInterrupt:
    while True:
        _wasmbox.call(b'{"op":"unwinding"}')
