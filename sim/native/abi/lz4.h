/* The two functions of liblz4 that the FST writer calls (Verilator's include/fstcpp), declared
 * from liblz4's public C API so the writer compiles where only the runtime library
 * (liblz4.so.1) is installed and its headers are not. Both are part of the API liblz4 keeps
 * stable across its 1.x releases. */
#ifndef SCIN_ABI_LZ4_H
#define SCIN_ABI_LZ4_H

#ifdef __cplusplus
extern "C" {
#endif

/* The largest size LZ4_compress_default can write for inputSize bytes (0 if too large). */
int LZ4_compressBound(int inputSize);
/* Compress srcSize bytes of src into dst (dstCapacity bytes); the compressed size, 0 on failure. */
int LZ4_compress_default(const char *src, char *dst, int srcSize, int dstCapacity);

#ifdef __cplusplus
}
#endif

#endif
