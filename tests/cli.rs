//! The README's main command works everywhere: without a GPU it falls back to the CPU with a notice.

use std::process::Command;

/// The CLI under test: `TILESPARSE_BIN` where the tests run away from the build tree (the GPU bundle).
fn tilesparse() -> Command {
    Command::new(std::env::var_os("TILESPARSE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tilesparse").into()))
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
    // Either the GPU ran it, or the CPU did and said why.
    assert!(stdout.contains("GPU ") || stderr.contains("notice:"), "stdout:\n{stdout}\nstderr:\n{stderr}");
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
