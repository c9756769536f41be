"""CPU kernels: the Linear layers' products on oneDNN (``onednn_linear``) and a KV cache that
decoding writes in place (``kv_cache``). Neither changes a result beyond float summation order."""
