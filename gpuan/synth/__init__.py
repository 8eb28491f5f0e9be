"""Generators of realistic inputs for tests, benchmarks and ``gpuan demo`` (never imported by an analysis,
and importing none): ``kineto`` writes PyTorch-2.x-like Kineto traces of a transformer training step,
``cycles`` LLM-inference kernel tables with known phases, ``ranks`` multi-rank runs with a planted
straggler, ``tensors`` GGUF models and tensor-access logs."""
