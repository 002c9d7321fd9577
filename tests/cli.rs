//! The README's main command works everywhere: without a GPU it falls back to the CPU with a notice; with
//! TILESPARSE_REQUIRE_GPU=1 (the GPU runs) it must have run on the GPU.

use std::io::Write;
use std::process::Command;

mod common;

/// The CLI under test: `TILESPARSE_BIN` where the tests run away from the build tree (the GPU bundle).
fn tilesparse() -> Command {
    Command::new(std::env::var_os("TILESPARSE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tilesparse").into()))
}

/// A file of tests/data, as a CLI argument.
fn data(file: &str) -> String {
    common::data_path(file).to_str().expect("a UTF-8 path").to_string()
}

#[test]
fn spmm_runs_and_verifies_on_any_machine() {
    let out = tilesparse()
        .args(["spmm", "--m", "300", "--k", "200", "--density", "0.05", "--n", "33", "--iters", "2", "--verify"])
        .output()
        .expect("running tilesparse");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("verify: OK"), "{stdout}");
    let on_gpu = stdout.lines().any(|l| l.starts_with("GPU "));
    if std::env::var("TILESPARSE_REQUIRE_GPU").as_deref() == Ok("1") {
        // A GPU run must not fall back to the CPU.
        assert!(
            on_gpu && !stderr.contains("notice:"),
            "TILESPARSE_REQUIRE_GPU=1 but the CLI did not run on the GPU:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    } else {
        // Either the GPU ran it, or the CPU did and said why.
        assert!(on_gpu || stderr.contains("notice:"), "stdout:\n{stdout}\nstderr:\n{stderr}");
    }
}

/// `spmm --bias-relu --verify`: C = ReLU(A * B + bias) checked against the oracle's, on the GPU (the automatic choice,
/// and a tensor-core kernel named by --config) or on the CPU backend; with TILESPARSE_REQUIRE_GPU=1 on the GPU, with
/// the kernel asked for.
#[test]
fn spmm_bias_relu_runs_and_verifies_on_any_machine() {
    for (dtype, config, n) in [("f32", "auto", "33"), ("f16", "spmm_tc_f16_n8", "64"), ("bf16", "auto", "130")] {
        let out = tilesparse()
            .args(["spmm", "--m", "300", "--k", "200", "--density", "0.05", "--n", n, "--iters", "2", "--verify"])
            .args(["--bias-relu", "--dtype", dtype, "--config", config])
            .output()
            .expect("running tilesparse");
        check_verified_run(&out, config, "C = ReLU(A * B + bias)", &format!("{dtype} {config}"));
    }
}

/// An `spmm --verify` run: it succeeded, verified, printed `header`, and ran on the GPU with `config` (unless "auto")
/// where TILESPARSE_REQUIRE_GPU=1 says there is one, else on the GPU or with the CPU fallback's notice.
fn check_verified_run(out: &std::process::Output, config: &str, header: &str, label: &str) {
    let require = std::env::var("TILESPARSE_REQUIRE_GPU").as_deref() == Ok("1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("{label}:\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success() && stdout.contains("verify: OK"), "{what}");
    assert!(stdout.contains(header), "{what}");
    let gpu_line = stdout.lines().find(|l| l.starts_with("GPU "));
    if require {
        let line = gpu_line.unwrap_or_else(|| panic!("TILESPARSE_REQUIRE_GPU=1 but no GPU run: {what}"));
        assert!(config == "auto" || line.contains(config), "{what}");
    } else {
        assert!(gpu_line.is_some() || stderr.contains("notice:"), "{what}");
    }
}

/// `spmm --alpha --beta --verify`: C = alpha * A * B + beta * C (with --bias-relu, then ReLU(. + bias)) checked against
/// the oracle's, one run on the starting C, on the GPU (the automatic choice, and a tensor-core kernel at an n it pads)
/// or on the CPU backend; with TILESPARSE_REQUIRE_GPU=1 on the GPU.
#[test]
fn spmm_scalars_run_and_verify_on_any_machine() {
    let cases = [
        ("f32", "auto", "33", "-1.5", "0.75", false, "C = -1.5 * A * B + 0.75 * C"),
        ("f16", "spmm_tc_f16_n8", "60", "1", "1", true, "C = ReLU(1 * A * B + 1 * C + bias)"),
        ("bf16", "auto", "130", "2", "0", false, "C = 2 * A * B"),
    ];
    for (dtype, config, n, alpha, beta, bias, header) in cases {
        let out = tilesparse()
            .args(["spmm", "--m", "300", "--k", "200", "--density", "0.05", "--n", n, "--iters", "3", "--verify"])
            .args(["--dtype", dtype, "--config", config, "--alpha", alpha, "--beta", beta])
            .args(if bias { &["--bias-relu"][..] } else { &[][..] })
            .output()
            .expect("running tilesparse");
        check_verified_run(&out, config, header, &format!("{dtype} {config} alpha {alpha} beta {beta}"));
    }
}

/// `spmm --transpose --verify`: C = A^T * B, A transposed on the device (on the GPU) or by sprs (the CPU backend),
/// checked against the oracle of sprs's A^T; with the automatic choice, a tensor-core kernel, --tune, and the
/// scalars and bias. A^T of a 300 x 200 A is 200 x 300, so an explicit kernel is checked for A^T's shape.
#[test]
fn spmm_transposed_runs_and_verifies_on_any_machine() {
    let cases: [(&str, &str, &str, &[&str], &str); 4] = [
        ("f32", "auto", "33", &[], "A^T of uniform_300x200_d0.05, 200 x 300, "),
        ("f16", "spmm_tc_f16_n8", "64", &["--beta", "0.5", "--bias-relu"], "C = ReLU(1 * A^T * B + 0.5 * C + bias)"),
        ("f32", "spmm_tc_f32_n4", "48", &[], "C = A^T * B"),
        ("bf16", "auto", "130", &["--tune"], "; B: 300 x 130;"),
    ];
    for (dtype, config, n, extra, header) in cases {
        let out = tilesparse()
            .args(["spmm", "--m", "300", "--k", "200", "--density", "0.05", "--n", n, "--iters", "3", "--verify"])
            .args(["--transpose", "--dtype", dtype, "--config", config])
            .args(extra)
            .output()
            .expect("running tilesparse");
        check_verified_run(&out, config, header, &format!("--transpose {dtype} {config} {extra:?}"));
    }
}

/// `spmm --b-layout col --c-layout col` (and each alone) runs and verifies on any machine: on the GPU through
/// `spmm_layouts`, B and C held column-major; on the CPU backend, which computes the same product row-major.
#[test]
fn spmm_column_major_runs_and_verifies_on_any_machine() {
    let cases: [(&str, &str, &[&str], &str); 4] = [
        ("f32", "auto", &["--b-layout", "col", "--c-layout", "col"], "; B: 200 x 33 (column-major); C column-major;"),
        ("f16", "spmm_tc_f16_n8", &["--b-layout", "col", "--beta", "0.5", "--bias-relu"], "C = ReLU(1 * A * B + 0.5 "),
        ("f32", "spmm_tc_f32_n4", &["--c-layout", "col", "--beta", "-1"], "; B: 200 x 33; C column-major;"),
        ("bf16", "auto", &["--b-layout", "col", "--c-layout", "col", "--transpose"], "A^T of uniform_300x200_d0.05"),
    ];
    for (dtype, config, extra, header) in cases {
        let out = tilesparse()
            .args(["spmm", "--m", "300", "--k", "200", "--density", "0.05", "--n", "33", "--iters", "3", "--verify"])
            .args(["--dtype", dtype, "--config", config])
            .args(extra)
            .output()
            .expect("running tilesparse");
        check_verified_run(&out, config, header, &format!("{dtype} {config} {extra:?}"));
    }
    let out = tilesparse().args(["spmm", "--b-layout", "diagonal"]).output().expect("running tilesparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("layout 'diagonal': row or col"), "{stderr}");
}

/// `spmm --tune` times the kernels on the GPU, runs the choice and verifies it with that kernel's bound; without a GPU
/// it says that it has nothing to choose from and runs the CPU backend. With `--bias-relu` it tunes and verifies C =
/// ReLU(A * B + bias), with the scalars (C read), and with --values-change (which needs --tune). It takes neither
/// --config nor --cpu.
#[test]
fn spmm_tune_chooses_on_the_gpu_or_says_why() {
    let scaled = ["--alpha", "-2", "--beta", "0.5", "--bias-relu"];
    for epilogue in [&[][..], &["--bias-relu"][..], &["--values-change"][..], &scaled[..]] {
        let out = tilesparse()
            .args(["spmm", "--m", "300", "--k", "200", "--density", "0.05", "--n", "64", "--iters", "2", "--tune"])
            .arg("--verify")
            .args(epilogue)
            .output()
            .expect("running tilesparse");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{epilogue:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(out.status.success() && stdout.contains("verify: OK"), "{what}");
        assert_eq!(stdout.contains("C = ReLU("), epilogue.contains(&"--bias-relu"), "{what}");
        assert_eq!(stdout.contains("C = ReLU(-2 * A * B + 0.5 * C + bias)"), epilogue == scaled, "{what}");
        let on_gpu = stdout.lines().any(|l| l.starts_with("GPU "));
        if on_gpu {
            assert!(stdout.contains("kernels timed in") && stdout.contains("(chosen"), "{what}");
        } else {
            assert!(std::env::var("TILESPARSE_REQUIRE_GPU").as_deref() != Ok("1"), "no GPU run: {what}");
            assert!(stderr.contains("--tune times GPU kernels"), "{what}");
        }
    }
    // --values-change is a way of tuning: alone it is refused.
    let out = tilesparse().args(["spmm", "--m", "64", "--k", "64", "--n", "8", "--values-change"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--tune"), "--values-change alone: {stderr}");
    for extra in [&["--config", "spmm_f32_s1d1_y4k32x8w8_u4_pred"][..], &["--cpu"][..]] {
        let out = tilesparse()
            .args(["spmm", "--m", "64", "--k", "64", "--n", "8", "--tune"])
            .args(extra)
            .output()
            .expect("running tilesparse");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("--tune chooses the kernel on the GPU"),
            "{extra:?}: {stderr}"
        );
    }
}

/// Output into a pipe whose reader has gone ends the CLI quietly (SIGPIPE, as `yes | head` ends), not in a panic.
#[cfg(unix)]
#[test]
fn a_closed_output_pipe_ends_the_cli_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both are new, open descriptors that nothing else owns or closes.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // No reader from the start: the CLI's first write meets a closed pipe, whatever the timing.
    drop(read);
    let out = tilesparse()
        .arg("info")
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .expect("running tilesparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("failed printing"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}\n{stderr}", out.status);
}

#[test]
fn spmm_cpu_flag_uses_the_cpu_backend() {
    let out = tilesparse()
        .args(["spmm", "--m", "64", "--k", "64", "--n", "8", "--iters", "1", "--verify", "--cpu"])
        .output()
        .expect("running tilesparse");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("CPU backend") && stdout.contains("verify: OK"), "{stdout}");
}

#[test]
fn a_bad_config_is_a_clear_error() {
    let out = tilesparse()
        .args(["spmm", "--m", "64", "--k", "64", "--n", "8", "--config", "spmm_f32_s3d1_y8k24x8w4_u4_pred"])
        .output()
        .expect("running tilesparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("vector widths must be powers of two"), "{stderr}");
}

/// Input errors are clear messages and a failing exit, not panics, on any machine (no GPU needed).
#[test]
fn bad_arguments_are_clear_errors() {
    let run = |args: &[&str]| {
        let out = tilesparse().args(args).output().expect("running tilesparse");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
        stderr
    };
    assert!(run(&["spmm", "--m", "64", "--k", "64", "--n", "8", "--density", "1.5"]).contains("--density 1.5"));
    assert!(run(&["spmm", "--m", "64", "--k", "64", "--n", "8", "--density", "NaN"]).contains("--density NaN"));
    assert!(run(&["spmm", "--m", "3000000000", "--k", "64", "--n", "8", "--density", "0"]).contains("i32::MAX"));
    assert!(run(&["spmm", "--m", "64", "--k", "64", "--n", "1000000000000"]).contains("i32::MAX"));
    // An explicit config is checked against the dtype, the compiled table and n on every machine (a build
    // without kernels, as in CI without nvcc, still checks the dtype).
    let wrong_dtype = ["spmm", "--m", "64", "--k", "64", "--n", "8", "--config", "spmm_f16_s4d8_y4k32x64w8_u4_pred"];
    assert!(run(&wrong_dtype).contains("f16"));
    let bad = std::env::temp_dir().join(format!("tilesparse-cli-{}.mtx", std::process::id()));
    std::fs::write(&bad, "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 3 3\n").unwrap();
    let stderr = run(&["spmv", "--matrix", bad.to_str().unwrap()]);
    std::fs::remove_file(&bad).ok();
    assert!(stderr.contains("must be square"), "{stderr}");
    // bench spmm on the caller's matrices: the files and widths are checked before the GPU is asked for.
    let pores = &data("pores_1.mtx.gz");
    assert!(run(&["bench", "spmm", "--n", "64"]).contains("--n sets the widths for --matrix"));
    assert!(run(&["bench", "spmm", "--matrix", pores, "--n", "64,0"]).contains("n = 0"));
    assert!(run(&["bench", "spmm", "--matrix", pores, "--n", "100000000"]).contains("i32::MAX"));
    assert!(run(&["bench", "spmm", "--matrix", "no-such-matrix.mtx"]).contains("no-such-matrix.mtx"));
    assert!(run(&["bench", "spmm", "--matrix", pores, "--dtype", "f64"]).contains("unsupported dtype f64"));
    // ... and so are generated ones (`--gen GENERATOR:MxK:DENSITY[:SEED[:eFRACTION]]`).
    assert!(run(&["bench", "spmm", "--gen", "uniform:64x64"]).contains("three to five fields"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:64x64:0.1:1:0.5"]).contains("'0.5' is not eFRACTION"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:64:0.1"]).contains("not MxK"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:64x6a:0.1"]).contains("'6a' is not a dimension"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:64x64:1.5"]).contains("density 1.5"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:64x64:0.1:-1"]).contains("'-1' is not a seed"));
    assert!(run(&["bench", "spmm", "--gen", "nosuch:64x64:0.1"]).contains("unknown generator 'nosuch'"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:3000000000x64:0.1"]).contains("i32::MAX"));
    assert!(run(&["bench", "spmm", "--gen", "pruned:100000x100000:0.1"]).contains("i32::MAX"));
    assert!(run(&["bench", "spmm", "--gen", "uniform:64x64:0.1", "--n", "0"]).contains("n = 0"));
    // bench sddmm: the same checks, for the inner dimension k.
    assert!(run(&["bench", "sddmm", "--k", "64"]).contains("--k sets the inner dimensions"));
    assert!(run(&["bench", "sddmm", "--gen", "uniform:64x64:0.1", "--k", "32,0"]).contains("--k 0"));
    assert!(run(&["bench", "sddmm", "--matrix", pores, "--k", "100000000"]).contains("i32::MAX"));
    assert!(run(&["bench", "sddmm", "--matrix", pores, "--dtype", "f64"]).contains("unsupported dtype f64"));
    assert!(run(&["sddmm", "--m", "64", "--k", "64", "--dtype", "f64"]).contains("unsupported dtype f64"));
    assert!(run(&["bench", "softmax", "--matrix", pores, "--dtype", "f64"]).contains("unsupported dtype f64"));
}

/// Whether a CLI run that needs the GPU succeeded. Only a machine without a GPU (or a build without kernels) may
/// fail it, and only when no GPU is required: then it prints a SKIP line for `test` and returns false.
fn gpu_run_succeeded(test: &str, what: &str, out: &std::process::Output) -> bool {
    if out.status.success() {
        return true;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let no_gpu = ["no CUDA driver", "no CUDA device", "kernels were not compiled"].iter().any(|w| stderr.contains(w));
    let require = std::env::var("TILESPARSE_REQUIRE_GPU").as_deref() == Ok("1");
    assert!(no_gpu && !require, "{what} failed:\nstdout:\n{stdout}\nstderr:\n{stderr}");
    // Written to the stderr handle, not with eprintln!, so that the test harness does not capture it.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {}", stderr.trim());
    false
}

/// `bench spmm --matrix --gen` runs the caller's matrices and generated ones at each width against cuSPARSE and
/// cuBLAS, table and JSON, with the tuned choice (`--tune`).
#[test]
fn bench_spmm_runs_the_callers_matrices() {
    let json = std::env::temp_dir().join(format!("tilesparse-cli-bench-{}.json", std::process::id()));
    let out = tilesparse()
        .args(["bench", "spmm", "--matrix", &data("pores_1.mtx.gz"), "--matrix", &data("west0479.mtx.gz")])
        .args(["--gen", "uniform:100x60:0.1"])
        .args(["--n", "8,40", "--selected-only", "--iters", "2", "--warmup", "1", "--tune"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("running tilesparse");
    if !gpu_run_succeeded("bench_spmm_runs_the_callers_matrices", "bench spmm --matrix", &out) {
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    std::fs::remove_file(&json).ok();
    assert!(stdout.contains("over 6 problems") && stdout.contains("tuned: geometric mean"), "{stdout}");
    // One JSON line per problem, in file then width order, the generated matrix last; each timed its selected
    // kernel, its tuned kernel (--tune) and cuSPARSE.
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("\"problem\"")).collect();
    let names = [
        "pores_1_n8",
        "pores_1_n40",
        "west0479_n8",
        "west0479_n40",
        "uniform_100x60_d0.1_n8",
        "uniform_100x60_d0.1_n40",
    ];
    assert_eq!(lines.len(), names.len(), "{text}");
    for (line, name) in lines.iter().zip(names) {
        assert!(stdout.contains(&format!("== {name} ")), "{name} missing from the table:\n{stdout}");
        assert!(line.starts_with(&format!("{{\"problem\":\"{name}\"")), "{name} expected:\n{line}");
        let selected = line.split("\"selected\":").nth(1).and_then(|r| r.split('}').next()).unwrap_or("");
        assert!(selected.contains("\"ms\":"), "{name}: the selected kernel did not run:\n{line}");
        let tuned = line.split("\"tuned\":").nth(1).and_then(|r| r.split('}').next()).unwrap_or("");
        assert!(tuned.contains("\"ms\":") && line.contains("\"tuning_ms\":"), "{name}: not tuned:\n{line}");
        let cusparse = line.split("\"cusparse\":[").nth(1).and_then(|r| r.split(']').next()).unwrap_or("");
        assert!(cusparse.contains("\"ms\":"), "{name}: no cuSPARSE algorithm ran:\n{line}");
    }
}

/// `bench spmm --transpose`: each problem is A^T, transposed on the device, every result checked against the oracle
/// of sprs's A^T (`--verify`), with cuSPARSE's SpMM with A transposed and its csr2csc timed beside, in the table and
/// the JSON (A^T's shape: m and k swapped), and a geometric mean against cuSPARSE with A transposed.
#[test]
fn bench_spmm_transposed_times_cusparse_with_a_transposed() {
    let json = std::env::temp_dir().join(format!("tilesparse-cli-transposed-{}.json", std::process::id()));
    let out = tilesparse()
        .args(["bench", "spmm", "--gen", "uniform:300x200:0.1", "--gen", "powerlaw:2000x500:0.01"])
        .args(["--n", "40", "--selected-only", "--verify", "--transpose", "--iters", "2", "--warmup", "1"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("running tilesparse");
    if !gpu_run_succeeded("bench_spmm_transposed_times_cusparse_with_a_transposed", "bench spmm --transpose", &out) {
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    std::fs::remove_file(&json).ok();
    assert!(stdout.contains("verify: OK: ") && !stdout.contains("WRONG"), "{stdout}");
    let summary = "C = A^T * B, ours on A^T against cuSPARSE's SpMM with A transposed: geometric mean";
    assert!(stdout.contains(summary) && stdout.contains("the transposition of A: ours "), "{stdout}");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("\"problem\"")).collect();
    let shapes = [("uniform_300x200_d0.1_n40^T", 200, 300), ("powerlaw_2000x500_d0.01_n40^T", 500, 2000)];
    assert_eq!(lines.len(), shapes.len(), "{text}");
    for (line, (name, m, k)) in lines.iter().zip(shapes) {
        assert!(line.starts_with(&format!("{{\"problem\":\"{name}\",\"m\":{m},\"k\":{k},")), "{name}:\n{line}");
        let transposed = line.split(",\"transposed\":").nth(1).expect("the --transpose figures");
        assert!(transposed.starts_with("{\"transpose_ms\":") && transposed.contains("cusparse_csr2csc"), "{line}");
        assert!(transposed.contains("\"name\":\"cusparse_transposed_CSR_ALG2\",\"ms\":"), "{name}:\n{line}");
    }
}

/// `bench spmm --col-major` times ours with B and C column-major (checked against the oracle with --verify) beside
/// cuSPARSE's SpMM with both column-major, prints both summaries and writes them to the JSON.
#[test]
fn bench_spmm_col_major_times_cusparse_in_that_layout() {
    let json = std::env::temp_dir().join(format!("tilesparse-cli-col-major-{}.json", std::process::id()));
    let out = tilesparse()
        .args(["bench", "spmm", "--gen", "uniform:300x200:0.1", "--gen", "powerlaw:2000x500:0.01", "--dtype", "f16"])
        .args(["--n", "40", "--selected-only", "--verify", "--col-major", "--iters", "2", "--warmup", "1"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("running tilesparse");
    if !gpu_run_succeeded("bench_spmm_col_major_times_cusparse_in_that_layout", "bench spmm --col-major", &out) {
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    std::fs::remove_file(&json).ok();
    assert!(stdout.contains("verify: OK: ") && !stdout.contains("WRONG"), "{stdout}");
    let summary = "B and C column-major, ours against cuSPARSE's SpMM with both column-major: geometric mean";
    assert!(stdout.contains(summary) && stdout.contains("our time over our row-major time"), "{stdout}");
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("\"problem\"")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    for line in lines {
        let col_major = line.split(",\"col_major\":").nth(1).expect("the --col-major figures");
        assert!(col_major.starts_with("{\"ours\":{\"name\":"), "{line}");
        assert!(col_major.contains("(B, C column-major)\",\"ms\":") && col_major.contains("\"check\":"), "{line}");
        assert!(col_major.contains("\"name\":\"cusparse_col_major_CSR_ALG1\""), "{line}");
    }
}

/// `bench spmm --verify` checks every result it times against the f64 oracle, each on a poisoned C: every compiled
/// variant that can run each problem, the tensor-core kernels and the selected one, in each element type; with
/// `--bias-relu` also the selected kernel's fused epilogue, timed beside cuSPARSE followed by the pass (unchecked).
#[test]
fn bench_spmm_verify_checks_every_variant_it_times() {
    for dtype in ["f32", "f16", "bf16"] {
        let json = std::env::temp_dir().join(format!("tilesparse-cli-verify-{dtype}-{}.json", std::process::id()));
        let out = tilesparse()
            .args(["bench", "spmm", "--dtype", dtype, "--matrix", &data("west0479.mtx.gz")])
            .args(["--gen", "uniform:257x300:0.1", "--gen", "powerlaw:1x64:0.5", "--gen", "pruned:96x384:0.3"])
            .args(["--n", "40,128", "--verify", "--bias-relu", "--iters", "1", "--warmup", "0"])
            .args(["--json", json.to_str().unwrap()])
            .output()
            .expect("running tilesparse");
        let what = format!("bench spmm --verify ({dtype})");
        if !gpu_run_succeeded("bench_spmm_verify_checks_every_variant_it_times", &what, &out) {
            return;
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let text = std::fs::read_to_string(&json).expect("the JSON report");
        std::fs::remove_file(&json).ok();
        assert!(stdout.contains("verify: OK: ") && !stdout.contains("WRONG"), "{dtype}:\n{stdout}");
        let summary = "C = ReLU(A * B + bias), fused, against cuSPARSE then a bias + ReLU pass: geometric mean";
        assert!(stdout.contains(summary) && stdout.contains("fused vs cuSPARSE + pass: "), "{dtype}:\n{stdout}");
        let problems: Vec<&str> = text.lines().filter(|l| l.contains("\"problem\"")).collect();
        assert_eq!(problems.len(), 8, "{dtype}:\n{text}");
        for line in problems {
            // The epilogue both ways, last: the fused run checked and passing, cuSPARSE + the pass not checked.
            let (line, bias_relu) = line.split_once(",\"bias_relu\":").expect("the --bias-relu figures");
            let (fused, unfused) = bias_relu.split_once(",\"unfused\":").expect("the unfused figure");
            assert!(fused.contains("+bias-relu\",\"ms\":") && fused.contains("\"mismatches\":0,"), "{dtype}: {line}");
            assert!(unfused.contains("pass\",\"ms\":") && !unfused.contains("check"), "{dtype}: {bias_relu}");
            // Every entry of ours that ran carries a passing check; cuSPARSE and cuBLAS carry none.
            let (ours, baselines) = line.split_once("\"cusparse\":").expect("a cuSPARSE list");
            let ran = ours.matches("\"ms\":").count();
            let passed = ours.matches("\"check\":{\"mismatches\":0,").count();
            assert!(ran > 10 && passed == ran, "{dtype}: {passed} of {ran} checked and passing:\n{line}");
            assert!(!baselines.contains("\"check\""), "{dtype}:\n{line}");
        }
    }
}

/// spmv --dtype f64 keeps the file's values and alpha in f64: y = 0.1 * 0.1 * x exactly as f64 computes it.
#[test]
fn spmv_f64_keeps_f64_values_and_scalars() {
    let dir = std::env::temp_dir().join(format!("tilesparse-cli-f64-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a.mtx");
    std::fs::write(&a, "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 0.1\n").unwrap();
    let dump = dir.join("out");
    let out = tilesparse()
        .args(["spmv", "--matrix", a.to_str().unwrap(), "--dtype", "f64", "--alpha", "0.1", "--verify"])
        .args(["--iters", "1", "--warmup", "0", "--dump", dump.to_str().unwrap()])
        .output()
        .expect("running tilesparse");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let read = |f: &str| tilesparse::mtx::read_dense_vector(&dump.join(f)).unwrap()[0];
    let (x, y) = (read("x.mtx"), read("y.mtx"));
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(y, 0.1 * (0.1 * x), "x {x}: f32 rounding of 0.1 would be off by ~1e-9 relative");
}

/// `sddmm --verify`: C = alpha (A B^T) o spy(C) + beta C checked against the oracle's, on the GPU (the automatic
/// choice, a config named by --config, the tensor cores) or on the CPU backend; with TILESPARSE_REQUIRE_GPU=1 on the
/// GPU, with the config asked for.
#[test]
fn sddmm_runs_and_verifies_on_any_machine() {
    let west = data("west0479.mtx.gz");
    let cases: [(&str, &str, &str, &[&str], &str); 7] = [
        ("f32", "auto", "64", &[], "C: uniform_300x200_d0.05, 300 x 200, "),
        ("f32", "sddmm_tc_f32", "37", &[], "A: 300 x 37"),
        ("bf16", "sddmm_tc_bf16", "70", &["--alpha", "-1", "--beta", "0.5"], "C = -1 * (A B^T) o spy(C) + 0.5 * C"),
        ("f16", "sddmm_f16_v8_l4_r1", "40", &["--alpha", "0.5", "--beta", "2"], "C = 0.5 * (A B^T) o spy(C) + 2 * C"),
        ("bf16", "auto", "33", &[], "A: 300 x 33; B: 200 x 33"),
        ("f32", "sddmm_f32_v2_l32_r4", "130", &["--matrix", &west], "west0479.mtx.gz, 479 x 479"),
        ("f32", "auto", "256", &["--plan"], "A: 300 x 256"),
    ];
    for (dtype, config, inner, extra, header) in cases {
        let out = tilesparse()
            .args(["sddmm", "--m", "300", "--k", "200", "--density", "0.05", "--inner", inner, "--iters", "3"])
            .args(["--verify", "--dtype", dtype, "--config", config])
            .args(extra)
            .output()
            .expect("running tilesparse");
        check_verified_run(&out, config, header, &format!("sddmm {dtype} {config} {extra:?}"));
    }
}

/// `sddmm` with a vector width that does not divide the inner dimension is an error naming the config that runs it, on
/// any machine (the CPU backend would run it, the GPU would not); an unknown kernel name is one too.
#[test]
fn sddmm_refuses_a_config_that_cannot_run() {
    let out = tilesparse()
        .args(["sddmm", "--m", "50", "--k", "40", "--inner", "30", "--config", "sddmm_f32_v4_l2_r1"])
        .output()
        .expect("running tilesparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("does not divide k = 30") && stderr.contains("sddmm_f32_v2_l"), "{stderr}");
    let out = tilesparse()
        .args(["sddmm", "--m", "50", "--k", "40", "--inner", "32", "--config", "sddmm_f32_v8_l2_r1"])
        .output()
        .expect("running tilesparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("not an SDDMM kernel for f32"), "{stderr}");
    let out = tilesparse()
        .args(["sddmm", "--m", "50", "--k", "40", "--inner", "32", "--plan", "--config", "sddmm_f32_v4_l8_r1"])
        .output()
        .expect("running tilesparse");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("--plan chooses the kernel"), "{stderr}");
}

/// `bench softmax --matrix --gen --all-configs --verify`: the caller's matrices, every config (6 lane counts, with and
/// without the chunk kernels), each checked forward and backward against the oracle, in the table and the JSON.
#[test]
fn bench_softmax_runs_the_callers_matrices() {
    let json = std::env::temp_dir().join(format!("tilesparse-cli-softmax-{}.json", std::process::id()));
    let out = tilesparse()
        .args(["bench", "softmax", "--matrix", &data("west0479.mtx.gz"), "--gen", "powerlaw:3000x2000:0.01"])
        .args(["--dtype", "bf16", "--all-configs", "--verify", "--iters", "2", "--warmup", "1"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("running tilesparse");
    if !gpu_run_succeeded("bench_softmax_runs_the_callers_matrices", "bench softmax", &out) {
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    std::fs::remove_file(&json).ok();
    assert!(stdout.contains("verified against the f64 oracle: 0 result(s) outside their bound"), "{stdout}");
    for name in ["west0479", "powerlaw_3000x2000_d0.01"] {
        assert!(stdout.contains(name) && text.contains(&format!("\"problem\":\"{name}\"")), "{name}: {stdout}");
    }
    // Each problem: the 12 configs (the automatic ones among them, or beside them).
    assert!(text.matches("\"verified\":true").count() >= 2 * 12 && !text.contains("\"verified\":false"), "{text}");
    assert!(text.contains("\"automatic_backward\":"), "{text}");
}

/// `bench sddmm --matrix --gen --all-configs --verify`: the caller's structures at each inner dimension, every config
/// that can run each one checked and timed, cuSPARSE's SDDMM (both forms of B) and cuBLAS's GEMM beside, table and JSON.
#[test]
fn bench_sddmm_runs_the_callers_matrices() {
    let json = std::env::temp_dir().join(format!("tilesparse-cli-sddmm-{}.json", std::process::id()));
    let out = tilesparse()
        .args(["bench", "sddmm", "--matrix", &data("west0479.mtx.gz"), "--gen", "powerlaw:300x200:0.05"])
        .args(["--k", "32,34", "--all-configs", "--verify", "--iters", "2", "--warmup", "1"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("running tilesparse");
    if !gpu_run_succeeded("bench_sddmm_runs_the_callers_matrices", "bench sddmm", &out) {
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(&json).expect("the JSON report");
    std::fs::remove_file(&json).ok();
    assert!(stdout.contains("verified against the f64 oracle: 0 result(s) outside their bound"), "{stdout}");
    let names = ["west0479_k32", "west0479_k34", "powerlaw_300x200_d0.05_k32", "powerlaw_300x200_d0.05_k34"];
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("\"problem\"")).collect();
    assert_eq!(lines.len(), names.len(), "{text}");
    for (line, name) in lines.iter().zip(names) {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name} missing from the table:\n{stdout}");
        assert!(line.starts_with(&format!("{{\"problem\":\"{name}\"")), "{name} expected:\n{line}");
        // Every config whose vector divides k: 36 of the f32 ones at k = 32, 24 (widths 1 and 2) at k = 34.
        let configs = line.matches("\"name\":\"sddmm_f32_").count() - 1;
        assert_eq!(configs, if name.ends_with("k32") { 36 } else { 24 }, "{name}:\n{line}");
        let checked: Vec<&str> =
            line.split("\"mismatches\":").skip(1).map(|r| r.split(['}', ',']).next().unwrap()).collect();
        assert!(checked.len() > configs && checked.iter().all(|&m| m == "0"), "{name}: {checked:?}\n{line}");
        let cusparse = line.split("\"cusparse\":[").nth(1).and_then(|r| r.split(']').next()).unwrap_or("");
        assert!(cusparse.contains("\"ms\":"), "{name}: cuSPARSE did not run:\n{line}");
    }
}
