//! Criterion group `spgemm`: the production SpGEMM end to end (symbolic + allocation + numeric), its numeric
//! phase on a reused plan, and cuSPARSE's SpGEMM ALG1/ALG2/ALG3 end to end, on the same inputs, CUDA-event
//! time, throughput in products (a_ik * b_kj) per second.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tilesparse::baseline::cusparse::{self, Cusparse, SpgemmAlg};
use tilesparse::spgemm::{spgemm, SpgemmPlan};
use tilesparse::timing::event_time;
use tilesparse::{gen, DeviceCsr, Gpu};

fn spgemm_group(c: &mut Criterion) {
    let gpu = match Gpu::new(0) {
        Ok(g) if tilesparse::kernels::KERNELS_BUILT => g,
        Ok(_) => return eprintln!("SKIP spgemm: this build has no kernels"),
        Err(e) => return eprintln!("SKIP spgemm: no GPU ({e})"),
    };
    let lib = Cusparse::new(&gpu).map_err(|e| eprintln!("spgemm: no cuSPARSE baseline ({e})")).ok();
    let mut group = c.benchmark_group("spgemm");
    group.sample_size(20).measurement_time(Duration::from_secs(2));
    for (name, a) in [
        ("uniform_65536_16", gen::uniform_random(65536, 65536, 16.0 / 65536.0, 91)),
        ("powerlaw_65536_8", gen::power_law(65536, 65536, 8.0, 1.5, 92)),
        ("banded_65536_hb4", gen::banded(65536, 65536, 4, 93)),
    ] {
        let a_dev = DeviceCsr::upload(&gpu, a.view()).unwrap();
        let mut plan = SpgemmPlan::new(&gpu, &a_dev, &a_dev).unwrap();
        group.throughput(Throughput::Elements(plan.products()));
        group.bench_function(BenchmarkId::new("production", name), |bench| {
            bench.iter_custom(|iters| event_time(&gpu, iters, || spgemm(&gpu, &a_dev, &a_dev).map(drop)).unwrap())
        });
        let mut c_dev = plan.numeric(&gpu, &a_dev, &a_dev).unwrap();
        group.bench_function(BenchmarkId::new("numeric_reused_plan", name), |bench| {
            bench.iter_custom(|iters| {
                event_time(&gpu, iters, || plan.numeric_into(&gpu, &a_dev, &a_dev, &mut c_dev)).unwrap()
            })
        });
        let Some(lib) = &lib else { continue };
        for alg in SpgemmAlg::ALL {
            group.bench_function(BenchmarkId::new(format!("cusparse_{}", alg.name()), name), |bench| {
                bench.iter_custom(|iters| {
                    event_time(&gpu, iters, || cusparse::spgemm(&gpu, lib, &a_dev, &a_dev, alg).map(drop)).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, spgemm_group);
criterion_main!(benches);
