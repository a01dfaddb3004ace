# expect: contained
# Raises MemoryError far below the memory limit: an ordinary exception, not ErrMemoryLimit.
print("CONTAINED")
raise MemoryError
