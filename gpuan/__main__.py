from gpuan.cli import run

run()
