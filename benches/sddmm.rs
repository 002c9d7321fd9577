//! Criterion group `sddmm`: our SDDMM (`sddmm_auto`'s choice, and the plan's choice, `SddmmPlan::new`: the tensor
//! cores where C's tiles are well filled) and cuSPARSE's SDDMM (each form of B) on the same inputs, a sparse layer's
//! weight gradient (a pruned weight's structure, k = 256 tokens), uniform 4096^2 at 90% (k = 128) and sparse attention's
//! scores (a window of 256 and 16 global tokens over 4096, k = 64), in f32 and f16; CUDA-event time, throughput in FLOP
//! (2 nnz k, reported as elements).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::f16;
use sprs::CsMat;
use tilesparse::baseline::cusparse::{Cusparse, CusparseSddmm, SddmmForm};
use tilesparse::suite::{load_matrix, matrices_dir};
use tilesparse::timing::event_time;
use tilesparse::{gen, sddmm, sddmm_planned, DeviceCsr, DeviceDense, Gpu, Scalar, SddmmConfig, SddmmPlan};

fn one<T: Scalar>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    gpu: &Gpu,
    lib: Option<&Cusparse>,
    name: &str,
    pattern: &CsMat<f32>,
    k: usize,
) {
    let pattern: CsMat<T> = gen::convert(pattern);
    let (m, n) = pattern.shape();
    let to_t = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
    let a = DeviceDense::upload(gpu, m, k, &to_t(gen::dense_matrix(m, k, 1))).unwrap();
    let b = DeviceDense::upload(gpu, n, k, &to_t(gen::dense_matrix(n, k, 2))).unwrap();
    let mut c = DeviceCsr::upload(gpu, pattern.view()).unwrap();
    let id = format!("{name}_k{k}_{}", T::DTYPE);
    group.throughput(Throughput::Elements(2 * pattern.nnz() as u64 * k as u64));
    let config = SddmmConfig::select(k, pattern.nnz(), T::DTYPE);
    group.bench_function(BenchmarkId::new(format!("ours_{}", config.kernel_name()), &id), |bench| {
        bench.iter_custom(|iters| event_time(gpu, iters, || sddmm(gpu, &a, &b, &mut c, &config)).unwrap())
    });
    let plan = SddmmPlan::new(gpu, &c, k).unwrap();
    group.bench_function(BenchmarkId::new(format!("ours_planned_{}", plan.kernel_name()), &id), |bench| {
        bench.iter_custom(|iters| {
            event_time(gpu, iters, || sddmm_planned(gpu, &a, &b, &mut c, &plan, 1.0, 0.0)).unwrap()
        })
    });
    let Some(lib) = lib else { return };
    for form in SddmmForm::ALL {
        let mut op = match CusparseSddmm::new(gpu, lib, &a, &b, &mut c, form) {
            Ok(op) => op,
            Err(e) => {
                eprintln!("sddmm: cuSPARSE ({}) unavailable on {id}: {e}", form.name());
                continue;
            }
        };
        let label = if form == SddmmForm::ColMajor { "cusparse_b_col_major" } else { "cusparse_b_transposed" };
        group.bench_function(BenchmarkId::new(label, &id), |bench| {
            bench.iter_custom(|iters| event_time(gpu, iters, || op.run(gpu)).unwrap())
        });
    }
}

fn sddmm_group(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP sddmm: this build has no kernels"),
        Err(e) => return eprintln!("SKIP sddmm: no GPU ({e})"),
    };
    let lib = Cusparse::new(&gpu).map_err(|e| eprintln!("sddmm: no cuSPARSE baseline ({e})")).ok();
    let mut problems = vec![
        ("uniform_4096x4096_s90".to_string(), gen::uniform_random(4096, 4096, 0.1, 42), 128),
        ("attention_s4096_w256_g16".to_string(), tilesparse::suite_softmax::local_global_mask(4096, 256, 16), 64),
    ];
    let weight = matrices_dir().join("minilm_l0_ffn_in_1536x384_s90.mtx.gz");
    match load_matrix(&weight) {
        Ok(w) => problems.push(("minilm_l0_ffn_in_1536x384_s90".into(), w, 256)),
        Err(e) => eprintln!("sddmm: {} not loaded ({e}), skipped", weight.display()),
    }
    let mut group = c.benchmark_group("sddmm");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    for (name, pattern, k) in &problems {
        one::<f32>(&mut group, &gpu, lib.as_ref(), name, pattern, *k);
        one::<f16>(&mut group, &gpu, lib.as_ref(), name, pattern, *k);
    }
    group.finish();
}

criterion_group!(benches, sddmm_group);
criterion_main!(benches);
