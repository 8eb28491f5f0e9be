"""Recording what a running job does, for the analyses to score: :mod:`gpuan.capture.live` (the live
speed-of-light tracker inside a PyTorch job). Capture is not an analysis: it hooks a live process, times
it and may print its report as the job goes."""
