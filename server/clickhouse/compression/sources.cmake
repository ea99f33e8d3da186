set(CHGATE_COMPRESSION_SOURCES compression/cityhash.cc compression/frame.cc)
