//! Criterion group `spmv`: the seed prefix-sum SpMV, the production SpMV and cuSPARSE CSR ALG1/ALG2 on the same
//! inputs, CUDA-event time, throughput in bytes of compulsory traffic (values + indices + row pointers + x + y
//! once).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tilesparse::baseline::cusparse::{Cusparse, CusparseSpmv, SpmvAlg};
use tilesparse::spmv::SeedSpmvWorkspace;
use tilesparse::suite_spmv::compulsory_bytes;
use tilesparse::timing::event_time;
use tilesparse::{gen, spmv, spmv_seed, DeviceCsr, Gpu, SpmvPlan};

fn spmv_group(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP spmv: this build has no kernels"),
        Err(e) => return eprintln!("SKIP spmv: no GPU ({e})"),
    };
    let lib = match Cusparse::new(&gpu) {
        Ok(lib) => Some(lib),
        Err(e) => {
            eprintln!("spmv: no cuSPARSE baseline ({e})");
            None
        }
    };
    let mut group = c.benchmark_group("spmv");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    for (name, a) in [
        ("uniform_1M_16", gen::uniform_random(1 << 20, 1 << 20, 16.0 / (1 << 20) as f64, 1)),
        ("powerlaw_1M_8", gen::power_law(1 << 20, 1 << 20, 8.0, 1.5, 2)),
    ] {
        let (m, k) = (a.rows(), a.cols());
        let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
        let x = gpu.stream().clone_htod(&gen::dense_matrix(k, 1, 3)).unwrap();
        let mut y = gpu.stream().alloc_zeros::<f32>(m).unwrap();
        group.throughput(Throughput::Bytes(compulsory_bytes(m, k, a.nnz(), 4) as u64));
        let mut ws = SeedSpmvWorkspace::new(&gpu, a.nnz()).unwrap();
        group.bench_function(BenchmarkId::new("seed", name), |bench| {
            bench.iter_custom(|iters| {
                event_time(&gpu, iters, || spmv_seed(&gpu, &a_dev, &x, 1.0, 0.0, &mut y, &mut ws)).unwrap()
            })
        });
        drop(ws);
        let plan = SpmvPlan::new(&gpu, &a_dev).unwrap();
        group.bench_function(BenchmarkId::new(format!("production_{}", plan.strategy()), name), |bench| {
            bench.iter_custom(|iters| {
                event_time(&gpu, iters, || spmv(&gpu, &a_dev, &x, 1.0, 0.0, &mut y, &plan)).unwrap()
            })
        });
        let Some(lib) = &lib else { continue };
        for alg in SpmvAlg::ALL {
            let mut op = match CusparseSpmv::new(&gpu, lib, &a_dev, &x, &mut y, alg) {
                Ok(op) => op,
                Err(e) => {
                    eprintln!("spmv: cuSPARSE {} unavailable on {name}: {e}", alg.name());
                    continue;
                }
            };
            group.bench_function(BenchmarkId::new(format!("cusparse_{}", alg.name()), name), |bench| {
                bench.iter_custom(|iters| event_time(&gpu, iters, || op.run(&gpu)).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, spmv_group);
criterion_main!(benches);
