# expect: contained
import socket
try:
    socket.getaddrinfo("example.com", 80)
    print("ESCAPED")
except (OSError, AttributeError):  # _socket has no getaddrinfo on WASI
    print("CONTAINED")
