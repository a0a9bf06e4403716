/* The part of zlib's public C API that the FST writer calls (Verilator's include/fstcpp), declared
 * so the writer compiles where only the runtime library (libz.so.1) is installed and its headers
 * are not. The types and functions are those zlib has kept stable since 1.2. */
#ifndef SCIN_ABI_ZLIB_H
#define SCIN_ABI_ZLIB_H

#ifdef __cplusplus
extern "C" {
#endif

typedef unsigned char Bytef;
typedef unsigned long uLong;
typedef uLong uLongf;

#define Z_OK 0

/* The largest size compress2 can write for sourceLen bytes. */
uLong compressBound(uLong sourceLen);
/* Compress sourceLen bytes of source into dest (*destLen bytes, set to the size written) at
 * level 0..9; Z_OK on success. */
int compress2(Bytef *dest, uLongf *destLen, const Bytef *source, uLong sourceLen, int level);

#ifdef __cplusplus
}
#endif

#endif
