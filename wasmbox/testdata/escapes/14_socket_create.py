# expect: contained
import socket
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.connect(("127.0.0.1", 22))
    print("ESCAPED")
except OSError:
    print("CONTAINED")
