# cmake -DFILE=<path> -P sha256_file.cmake: writes <path>.sha256 (the hex digest and a newline).
file(SHA256 "${FILE}" digest)
file(WRITE "${FILE}.sha256" "${digest}\n")
