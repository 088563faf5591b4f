#!/usr/bin/env python3
"""Data-parallel training against a single process (ctest DataParallel.*).

Trains the tiny fixture with the same --total-batch (4 micro-batches of B*T tokens per step) in one
process and under mpirun at 2 and 4 ranks, with ZeRO-1 (the default) and at 2 ranks without it
(--zero 0); every multi-rank run compares a hash of the weights across its ranks after every step
(LLMCPU_CHECK_REPLICAS) and fails if one differs. The ranks split the same tokens and average the
same gradients, so only the order of the fp32 sums differs: every step's loss, and the weights after one
step, agree within 1e-5 relative (bf16: 2^-8, one bf16 unit in the last place, as a weight's bf16
rounding may land on the other side). Over 10 steps AdamW amplifies such differences (an element
whose gradient is near zero can change the sign of its update), so the final weights are held to
the same run's own sensitivity: one process regrouping the very same tokens (B=4 x 2 micro-batches
instead of B=2 x 4) moves them by some amount, and the ranks may move them at most twice that (or,
in bf16, whose model file rounds every weight, by up to one bf16 unit in the last place). ZeRO-1
runs both ways a single machine allows: with the weights in memory the ranks share (the default) and
with the collectives alone (LLMCPU_SHARED_MEMORY=0, as between machines); at 2 ranks the two write
the same bytes. A shuffled 2-rank run is checked on its losses; two identical 2-rank runs must write
byte-identical files, checkpoints included: nothing may depend on timing. Resuming: at the same
ranks bit for bit; at other ranks, in one process, or from a --zero 0 run within the same bounds; a
state shard missing or of another world size is refused by name. In fp32 also: a killed or hung
rank, ranks started with different flags.
--family picks the model: gpt2 (the default) the tiny fixture; llama, qwen3, phi3, gemma, gemma2 or
gemma3_text a preset of that family with the fixture's vocabulary, written here (PRESETS), each with
what sets its family apart (grouped-query or multi-query attention, a head_dim other than
hidden/heads, q/k norms, fused projections, windows shorter than T, soft-capped scores and logits,
sliding and full layers with their own rotations, tied or untied heads). Their --save files and
checkpoints are Hugging Face folders (a model_NNNNNNNN.safetensors, config.json beside it); the same
checks but the killed, hung and refused ranks (which do not depend on the model).
--lora R trains a new LoRA adapter of rank R (alpha 2R) on the frozen model instead: the ranks
reduce the adapter's gradients and ZeRO-1 shards its moments; --save writes a PEFT adapter folder
and a checkpoint is adapter_NNNNNNNN/ with the state of the adapter (the weights compared are the
adapter's); the ranks never share weights (the base is frozen, and each keeps its own).
"""
import argparse
import array
import math
import os
import re
import subprocess
import sys

STEPS = 10

# Hugging Face families of the tiny fixture's vocabulary (311) and positions (32; T is 8), 2 layers
# of 48 channels and a SwiGLU or GeGLU of 80. Each keeps what sets its family apart from Llama's.
def preset(model_type, heads, kv_heads, more=""):
    """A preset of the tiny fixture's vocabulary (311) and context (32): 2 layers of 48 channels,
    an MLP of 80, `heads` query heads over `kv_heads` key/value heads, and the keys in `more`."""
    return (f'model_type = "{model_type}"\nhidden_size = 48\nintermediate_size = 80\n'
            f"num_hidden_layers = 2\nnum_attention_heads = {heads}\n"
            f"num_key_value_heads = {kv_heads}\nmax_position_embeddings = 32\nvocab_size = 311\n"
            + more)


PRESETS = {
    # 6 query heads sharing 2 key/value heads of 8, an untied head.
    "llama": preset("llama", 6, 2, "tie_word_embeddings = false\n"),
    # Heads of 16, not 48 / 4 (queries of 64 channels), q/k norms, tied embeddings (as Qwen3-0.6B).
    "qwen3": preset("qwen3", 4, 2, "head_dim = 16\ntie_word_embeddings = true\n"),
    # q, k, v and gate, up fused in its files (qkv_proj, gate_up_proj), a window of 4 on every
    # layer.
    "phi3": preset("phi3", 6, 2, "sliding_window = 4\ntie_word_embeddings = false\n"),
    # One key/value head for 4 query heads of 16, GeGLU, (1 + w) norms, scaled embeddings, tied.
    "gemma": preset("gemma", 4, 1, "head_dim = 16\n"),
    # Layer 0 a window of 4, layer 1 full (the family's alternation), four norms per layer, scores
    # scaled by 1/sqrt(8) (not the head's 16) and soft-capped at 5, logits at 3, tied.
    "gemma2": preset("gemma2", 4, 2, "head_dim = 16\nsliding_window = 4\nquery_pre_attn_scalar = 8\n"
                     "attn_logit_softcapping = 5.0\nfinal_logit_softcapping = 3.0\n"),
    # Layer 0 a window of 4 rotating with base 1e4, layer 1 full with 1e6, q/k norms, an untied head.
    "gemma3_text": preset("gemma3_text", 4, 2,
                          'head_dim = 16\nsliding_window = 4\n'
                          'layer_types = ["sliding_attention", "full_attention"]\n'
                          "rope_theta = 1000000.0\nrope_local_base_freq = 10000.0\n"
                          "query_pre_attn_scalar = 16\ntie_word_embeddings = false\n"),
}


def run(cmd, what):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    if p.returncode != 0:
        sys.exit(f"{what} exited with {p.returncode}:\n{p.stdout}")
    return p.stdout


def losses(output, what, count=STEPS):
    found = [float(m) for m in re.findall(r"^step +\d+/\d+ \| loss ([-0-9.e+naif]+)", output, re.M)]
    if len(found) != count:
        sys.exit(f"{what}: expected {count} step lines, found {len(found)}:\n{output}")
    return found


def bf16_to_floats(raw):
    halves = array.array("H", raw)
    return array.array("f", array.array("I", [h << 16 for h in halves]).tobytes())


def safetensors_weights(path):
    """The tensors of a safetensors file (F32 or BF16) as floats, in the order of their names."""
    import json
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    out = array.array("f")
    for name in sorted(k for k in header if k != "__metadata__"):
        t = header[name]
        begin, end = t["data_offsets"]
        if t["dtype"] == "F32":
            out.extend(array.array("f", data[begin:end]))
        elif t["dtype"] == "BF16":
            out.extend(bf16_to_floats(data[begin:end]))
        else:
            sys.exit(f"{path}: unexpected dtype {t['dtype']} of {name}")
    return out


def weights(path):
    """The parameters of a model file as floats: an llm.c file (version 3: fp32, version 5: bf16),
    or a Hugging Face family's safetensors."""
    if path.endswith(".safetensors"):
        return safetensors_weights(path)
    with open(path, "rb") as f:
        header = array.array("i", f.read(256 * 4))
        body = f.read()
    if header[1] == 3:
        return array.array("f", body)
    if header[1] == 5:
        return bf16_to_floats(body)
    sys.exit(f"{path}: unexpected model file version {header[1]}")


def relative_norm(a, b):
    num = math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    den = math.sqrt(sum(y * y for y in b))
    return num / den


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llmcpu", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--fixtures", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--family", default="gpt2", choices=["gpt2"] + list(PRESETS),
                    help="gpt2: the tiny fixture; another: that family's preset (PRESETS)")
    ap.add_argument("--lora", type=int, default=0, help="train a LoRA adapter of this rank")
    ap.add_argument("--lora-train", default="",
                    help="with --lora: base modules trained in full too (PEFT's modules_to_save)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    bound = 1e-5 if a.precision == "fp32" else 2.0**-8
    a.hf = a.family != "gpt2"  # Hugging Face folders for --save and the checkpoints
    model = os.path.join(a.fixtures, "tiny_model.bin")
    if a.hf:
        model = os.path.join(a.out, f"{a.family}.toml")
        with open(model, "w") as f:
            f.write(PRESETS[a.family])

    def train(ranks, save, steps=STEPS, batch=2, shuffle=False, extra=(), dry=False, shared=True):
        # A Hugging Face family is saved as a folder: NAME.bin becomes NAME.hf/ (a LoRA run's
        # adapter: NAME.lora/).
        if save and (a.hf or a.lora):
            save = save[:-len(".bin")] + (".lora" if a.lora else ".hf")
        if a.lora and "--resume" not in extra:  # a resumed run's adapter is its checkpoint's
            extra = ["--lora", str(a.lora), "--lora-alpha", str(2 * a.lora)] + list(extra)
            if a.lora_train:
                extra = ["--lora-train", a.lora_train] + extra
        args = [a.llmcpu, "train", "--model", model,
                "--train-data", os.path.join(a.fixtures, "tiny_train.bin"), "-b", str(batch),
                "-t", "8", "--total-batch", "64", "--steps", str(steps), "--lr", "1e-3",
                "--weight-decay", "0.1", "--precision", a.precision]
        args += list(extra) + (["--save", save] if save else [])
        if not shuffle:
            args.append("--no-shuffle")
        args += ["--seed", "3"]  # last: the refusal test changes it on one rank
        if dry:
            return args
        if ranks == 0:
            return run(args, "llmcpu train (one process)")
        # shared=False: the collectives alone, as between machines (no weights in shared memory).
        env = ["-x", f"LLMCPU_SHARED_MEMORY={int(shared)}"]
        return run(["timeout", "120", a.mpirun, "-np", str(ranks), "--oversubscribe", "--bind-to",
                    "none", "-x", "OMP_NUM_THREADS=1", "-x", "LLMCPU_CHECK_REPLICAS=1"] + env
                   + args,
                   f"mpirun -np {ranks} llmcpu train {' '.join(extra)}" +
                   ("" if shared else " (LLMCPU_SHARED_MEMORY=0)"))

    def path(name):
        return os.path.join(a.out, name)

    def saved(name):
        """The file --save wrote for `name` (NAME.bin; a Hugging Face family: its folder's
        model.safetensors; a LoRA run: its adapter's adapter_model.safetensors)."""
        if a.lora:
            return os.path.join(path(name[:-len(".bin")] + ".lora"), "adapter_model.safetensors")
        if a.hf:
            return os.path.join(path(name[:-len(".bin")] + ".hf"), "model.safetensors")
        return path(name)

    failures = []

    def check(ok, message):
        if not ok:
            failures.append(message)

    base = losses(train(0, path("one.bin")), "one process")
    base_w = weights(saved("one.bin"))
    train(0, path("one_step.bin"), steps=1)
    train(0, path("regrouped.bin"), batch=4)
    floor = relative_norm(weights(saved("regrouped.bin")), base_w)
    print(f"one process, B=4 x 2 against B=2 x 4: final weights relative difference {floor:.2e}")
    for n, zero, shared in ((2, "1", True), (4, "1", True), (2, "1", False), (4, "1", False),
                            (2, "0", True)):
        name = f"ranks{n}" + ("" if zero == "1" else "_zero0") + ("" if shared else "_unshared")
        flags = ["--zero", zero]
        what = f"{n} ranks, --zero {zero}" + ("" if shared else ", LLMCPU_SHARED_MEMORY=0")
        output = train(n, path(f"{name}.bin"), extra=flags, shared=shared)
        ours = losses(output, what)
        if zero == "1":
            check("ZeRO-1 over" in output, f"{what}: no per-rank optimizer memory line:\n{output}")
        # ZeRO-1 on one machine keeps one copy of the weights in shared memory; without ZeRO-1 or
        # with the collectives alone, every rank has its own.
        said = "one copy in memory shared by the" in output
        check(said == (zero == "1" and shared and not a.lora),
              f"{what}: shared weights line {said}:\n{output}")
        for i, (x, y) in enumerate(zip(ours, base)):
            check(abs(x - y) <= bound * abs(y), f"{what}, step {i + 1}: loss {x} vs {y}")
        train(n, path(f"{name}_step.bin"), steps=1, extra=flags, shared=shared)
        first = relative_norm(weights(saved(f"{name}_step.bin")), weights(saved("one_step.bin")))
        final = relative_norm(weights(saved(f"{name}.bin")), base_w)
        print(f"{what}: weights after 1 step {first:.2e}, after {STEPS} steps {final:.2e}")
        check(first <= bound, f"{what}: weights after one step differ by {first:.2e}")
        check(final <= max(2 * floor, bound), f"{what}: final weights differ by {final:.2e}, "
              f"more than twice the one-process regrouping's {floor:.2e} (and than {bound:.1e})")
    shuffled = losses(train(0, path("one_shuffled.bin"), shuffle=True), "one process, shuffled")
    ours = losses(train(2, path("ranks2_shuffled.bin"), shuffle=True), "2 ranks, shuffled")
    for i, (x, y) in enumerate(zip(ours, shuffled)):
        check(abs(x - y) <= bound * abs(y), f"2 ranks shuffled, step {i + 1}: loss {x} vs {y}")
    check(shuffled != base, "shuffling did not change the batches")
    for suffix, shared in (("", True), ("_unshared", False)):
        train(2, path(f"ranks2_again{suffix}.bin"), shared=shared)
        with open(saved(f"ranks2_again{suffix}.bin"), "rb") as x, \
                open(saved(f"ranks2{suffix}.bin"), "rb") as y:
            check(x.read() == y.read(),
                  f"two identical 2-rank runs wrote different model files ({suffix or 'shared'})")
    # Two ranks' sum is g0 + g1 whichever rank adds or in whatever order MPI does (IEEE addition
    # commutes), so the shared-memory sums and the collectives' give the same bits.
    with open(saved("ranks2_unshared.bin"), "rb") as x, open(saved("ranks2.bin"), "rb") as y:
        check(x.read() == y.read(), "2 ranks with LLMCPU_SHARED_MEMORY=0 wrote another model file")
    resume_and_refusals(a, train, path, saved, check, bound)
    if a.precision == "fp32" and not a.hf:
        killed_rank_ends_the_job(a, train, path, check)
        different_flags_are_refused(a, train, check)
    if failures:
        sys.exit(f"{a.family} {a.precision}:\n" + "\n".join(failures))
    print(f"{a.family} {a.precision}: 2 and 4 ranks match one process; reruns byte-identical")


def resume_and_refusals(a, train, path, saved, check, bound):
    """A 2-rank ZeRO-1 run resumed at 2 ranks is bit-exact, and a rerun writes the same checkpoint
    files, as does a run without shared weights; resumed at 1 and 4 ranks, from a 4-rank run at 2, and from a --zero 0 run (one whole
    state) at 2 ranks, it goes on within `bound` (1e-5 in fp32). A missing shard, or one of another
    world size, is refused by name."""
    import shutil

    def checkpointed(ranks, name, extra=(), shared=True):
        ck = path(name)
        shutil.rmtree(ck, ignore_errors=True)
        out = train(ranks, path(name + ".bin"),
                    extra=["--checkpoint-dir", ck, "--checkpoint-every", "5"] + list(extra),
                    shared=shared)
        return ck, losses(out, f"{ranks} ranks, checkpointing {' '.join(extra)}")

    def step5(ck, dest, skip=()):
        shutil.rmtree(dest, ignore_errors=True)
        os.makedirs(dest)
        for name in os.listdir(ck):
            if ("00000005" in name or name == "config.json") and name not in skip:
                if os.path.isdir(os.path.join(ck, name)):  # a LoRA run's adapter folder
                    shutil.copytree(os.path.join(ck, name), os.path.join(dest, name))
                else:
                    shutil.copy(os.path.join(ck, name), dest)
        return dest

    def checkpoint_files(ck):
        """The checkpoint folder's files, a LoRA adapter folder's by their path inside it."""
        out = []
        for name in sorted(os.listdir(ck)):
            if os.path.isdir(os.path.join(ck, name)):
                out += [os.path.join(name, f) for f in sorted(os.listdir(os.path.join(ck, name)))]
            else:
                out.append(name)
        return out

    ck, full = checkpointed(2, "ck")
    model_file = ("adapter_00000005" if a.lora else
                  "model_00000005." + ("safetensors" if a.hf else "bin"))
    check(sorted(f for f in os.listdir(ck) if "00000005" in f) ==
          [model_file, "state_00000005.bin", "state_00000005.rank0-of-2.bin",
           "state_00000005.rank1-of-2.bin"], f"unexpected checkpoint files: {os.listdir(ck)}")
    want_config = a.hf and not a.lora  # a LoRA checkpoint holds the adapter alone
    check(want_config == os.path.exists(os.path.join(ck, "config.json")),
          f"config.json {'missing from' if want_config else 'in'} the checkpoint folder")
    again, _ = checkpointed(2, "ck_again")
    # Without shared memory (in bf16 the ranks then release the other ranks' parts of the fp32
    # master, and the model file comes from the bf16 copy) the checkpoints are the same bytes.
    unshared, _ = checkpointed(2, "ck_unshared", shared=False)
    for name in checkpoint_files(ck):
        if name.endswith((".bin", ".safetensors", ".json")):
            for other, what in ((again, "two identical 2-rank runs"),
                                (unshared, "2-rank runs with and without shared weights")):
                with open(os.path.join(ck, name), "rb") as x, \
                        open(os.path.join(other, name), "rb") as y:
                    check(x.read() == y.read(), f"{what} wrote different {name}")
    ck4, _ = checkpointed(4, "ck4")
    ck_whole, _ = checkpointed(2, "ck_zero0", ["--zero", "0"])
    check(not any(".rank" in f for f in os.listdir(ck_whole)), "--zero 0 wrote state shards")
    for n, source, what in ((2, ck, "2 ranks from 2"), (1, ck, "1 process from 2 ranks"),
                            (4, ck, "4 ranks from 2"), (2, ck4, "2 ranks from 4"),
                            (2, ck_whole, "2 ranks from a --zero 0 run")):
        resumed_dir = step5(source, path("ck_resumed"))
        out = train(0 if n == 1 else n, path("resumed.bin"), extra=["--resume", resumed_dir])
        ours = losses(out, f"resumed at {what}", STEPS - 5)
        if what == "2 ranks from 2":
            check(ours == full[5:], f"resumed at {what}: losses {ours} vs {full[5:]}")
            with open(saved("resumed.bin"), "rb") as x, open(saved("ck.bin"), "rb") as y:
                check(x.read() == y.read(), f"resumed at {what}: the final model file differs")
        else:
            for i, (x, y) in enumerate(zip(ours, full[5:])):
                check(abs(x - y) <= bound * abs(y), f"resumed at {what}, step {i + 6}: {x} vs {y}")
    # A shard missing, and one of a 4-rank run in a 2-rank checkpoint: refused, naming the file.
    bad = step5(ck, path("ck_bad"), skip=("state_00000005.rank1-of-2.bin",))
    p = subprocess.run(train(0, None, extra=["--resume", bad], dry=True), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    check(p.returncode != 0 and "state_00000005.rank1-of-2.bin: cannot open" in p.stdout,
          f"a missing shard was not refused by name:\n{p.stdout}")
    shutil.copy(os.path.join(ck4, "state_00000005.rank1-of-4.bin"),
                os.path.join(bad, "state_00000005.rank1-of-2.bin"))
    p = subprocess.run(train(0, None, extra=["--resume", bad], dry=True), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    check(p.returncode != 0 and "a part for a world of ranks 4, expected 2" in p.stdout,
          f"a shard of another world size was not refused by name:\n{p.stdout}")


def different_flags_are_refused(a, train, check):
    """Rank 1 with another --seed: refused by name, the job ends with an error."""
    base = train(0, None, dry=True)
    cmd = ["timeout", "120", a.mpirun, "--oversubscribe", "--bind-to", "none", "-x",
           "OMP_NUM_THREADS=1", "-np", "1"] + base + [":", "-np", "1"] + base[:-1] + ["4"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    check(p.returncode != 0, "ranks with different --seed were not refused")
    check("error on rank 1 of 2: this rank has --seed: 4, rank 0 has 3" in p.stdout,
          f"the refusal does not name the rank and the flag:\n{p.stdout}")


def start_and_hit_rank_1(a, train, ck, what, extra=()):
    """Starts a long 2-rank run checkpointing into ck, waits for its first checkpoint, sends `what`
    (a signal) to rank 1 and returns the job's output, exit code and seconds from the signal to the
    job's end (None when rank 1 could not be found)."""
    import shutil
    import signal
    import time
    shutil.rmtree(ck, ignore_errors=True)
    args = train(2, None, steps=100000,
                 extra=["--checkpoint-dir", ck, "--checkpoint-every", "20"] + list(extra), dry=True)
    job = subprocess.Popen(["timeout", "300", a.mpirun, "-np", "2", "--oversubscribe", "--bind-to",
                            "none", "-x", "OMP_NUM_THREADS=1"] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(ck, "state_00000020.bin")) and time.time() < deadline:
        time.sleep(0.05)
    def parent(pid):
        try:
            with open(f"/proc/{pid}/stat") as f:
                return int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return 0

    victim = None  # rank 1 of this job: our llmcpu, below our timeout/mpirun, with rank 1's env
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        ancestors, p = [], int(pid)
        for _ in range(4):
            p = parent(p)
            ancestors.append(p)
        if (b"OMPI_COMM_WORLD_RANK=1" in env and argv0 == a.llmcpu.encode() and
                job.pid in ancestors):
            victim = int(pid)
    if victim is None or job.poll() is not None:
        job.kill()
        return job.communicate()[0], None, None
    os.kill(victim, what)
    hit = time.time()
    try:
        out, _ = job.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        job.kill()
        out, _ = job.communicate()
    took = time.time() - hit
    try:
        os.kill(victim, signal.SIGKILL)  # a stopped rank that outlived the job
    except OSError:
        pass
    return out, job.returncode, took


def killed_rank_ends_the_job(a, train, path, check):
    """SIGKILL to rank 1 mid-run ends the whole job within 30 s, and the newest complete checkpoint
    resumes; a rank that hangs (SIGSTOP) ends it once --comm-timeout has passed."""
    import signal
    ck = path("ck_killed")
    out, code, took = start_and_hit_rank_1(a, train, ck, signal.SIGKILL)
    check(took is not None, f"could not find rank 1 of a running 2-rank job to kill:\n{out}")
    if took is None:
        return
    print(f"rank 1 killed: the job ended {took:.1f} s later with exit code {code}")
    check(took <= 30, f"the job outlived its killed rank by {took:.0f} s")
    check(code != 0, "a job with a killed rank exited 0")
    check("signal 9" in out, f"mpirun does not say that a rank was killed:\n{out[-2000:]}")
    steps = sorted(int(f[6:14]) for f in os.listdir(ck) if re.fullmatch(r"state_\d{8}\.bin", f))
    check(bool(steps), "no complete checkpoint survived")
    if steps:
        out = train(2, None, steps=steps[-1] + 3, extra=["--resume", ck])
        check("step " in out and "error" not in out, f"the surviving checkpoint did not resume:\n{out}")

    out, code, took = start_and_hit_rank_1(a, train, path("ck_hung"), signal.SIGSTOP,
                                           extra=["--comm-timeout", "3"])
    check(took is not None, f"could not find rank 1 of a running 2-rank job to stop:\n{out}")
    if took is None:
        return
    print(f"rank 1 stopped: the job ended {took:.1f} s later with exit code {code}")
    check(took <= 15, f"a hung rank kept the job waiting {took:.0f} s with --comm-timeout 3")
    check(code != 0, "a job with a hung rank exited 0")
    check(re.search(r"rank 0: MPI_\w+ has waited", out) and "--comm-timeout 3" in out,
          f"the timeout does not say which rank gave up and why:\n{out[-2000:]}")


if __name__ == "__main__":
    main()
