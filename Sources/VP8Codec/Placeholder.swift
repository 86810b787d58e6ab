// VP8Codec
