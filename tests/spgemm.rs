//! The SpGEMM ladder (k0..k4, kp) and the COO -> CSR conversion on the GPU against the f64 oracle, and the
//! host-side output bound and kernel names (no GPU needed).

mod common;

use common::{from_triplets, gpu_or_skip};
use sprs::CsMat;
use tilesparse::cpu::oracle;
use tilesparse::spgemm::{
    check_product, coo_to_csr, output_nnz_bound, spgemm_ladder, DeviceCoo, LadderKernel, SPGEMM_K4_GRID,
};
use tilesparse::{gen, DeviceCsr, Error, Gpu};

/// Runs each kernel on A * B, converts to CSR and checks structure and values (`check_product` derives the
/// bound gamma(p + 1) |A||B| from the number p of products per entry).
fn check(gpu: &Gpu, what: &str, a: &CsMat<f32>, b: &CsMat<f32>, kernels: &[LadderKernel]) {
    let a_dev = DeviceCsr::upload(gpu, a.view()).unwrap();
    let b_dev = DeviceCsr::upload(gpu, b.view()).unwrap();
    for &kernel in kernels {
        let coo = spgemm_ladder(gpu, &a_dev, &b_dev, kernel).unwrap_or_else(|e| panic!("{what}, {kernel}: {e}"));
        assert!(coo.nnz() <= coo.capacity(), "{what}, {kernel}");
        let c = coo_to_csr(gpu, &coo).and_then(|c| c.download(gpu)).unwrap_or_else(|e| panic!("{what}, {kernel}: {e}"));
        check_product(a.view(), b.view(), &c).unwrap_or_else(|e| panic!("{what}, {kernel}: {e}"));
    }
}

fn transpose(a: &CsMat<f32>) -> CsMat<f32> {
    a.transpose_view().to_csr()
}

/// A * B or A * A^T when A is not square.
fn square_product(a: &CsMat<f32>) -> CsMat<f32> {
    if a.rows() == a.cols() {
        a.clone()
    } else {
        transpose(a)
    }
}

fn cases() -> Vec<(&'static str, CsMat<f32>, CsMat<f32>)> {
    let power = gen::power_law(500, 500, 8.0, 1.8, 2);
    let banded = gen::banded(400, 400, 5, 3);
    let aat = gen::power_law(300, 400, 10.0, 1.5, 4);
    // Product entries that cancel to exactly 0, and a stored zero in A: both stay in C's structure.
    let cancel_a = from_triplets(3, 3, &[(0, 0, 1.0), (0, 1, 1.0), (1, 2, 0.0), (2, 0, 2.0)]);
    let cancel_b = from_triplets(3, 2, &[(0, 0, 1.0), (1, 0, -1.0), (2, 1, 5.0), (0, 1, 3.0)]);
    vec![
        (
            "random rectangular 300x200 * 200x250",
            gen::uniform_random(300, 200, 0.05, 1),
            gen::uniform_random(200, 250, 0.05, 11),
        ),
        ("power-law A * A", power.clone(), power),
        ("banded A * A", banded.clone(), banded),
        (
            "empty rows of A, empty columns of B",
            gen::with_empty_rows(&gen::uniform_random(200, 150, 0.04, 5), 0.4, 6),
            transpose(&gen::with_empty_rows(&gen::uniform_random(180, 150, 0.04, 7), 0.4, 8)),
        ),
        ("A * A^T", aat.clone(), transpose(&aat)),
        ("k = 1", gen::uniform_random(50, 1, 0.5, 9), gen::uniform_random(1, 60, 0.5, 10)),
        ("wide B (many tiles)", gen::uniform_random(64, 64, 0.05, 12), gen::uniform_random(64, 9000, 0.01, 13)),
        (
            "an output row longer than the shared-memory sort",
            gen::with_dense_row(&gen::uniform_random(100, 100, 0.02, 14), 3),
            gen::uniform_random(100, 6000, 0.01, 15),
        ),
        ("nnz(A) = 0", CsMat::zero((17, 9)), gen::uniform_random(9, 13, 0.3, 16)),
        ("m = 0", CsMat::zero((0, 5)), gen::uniform_random(5, 7, 0.5, 17)),
        ("cancellation and stored zeros", cancel_a, cancel_b),
    ]
}

#[test]
fn ladder_kernels_match_the_oracle() {
    let Some(gpu) = gpu_or_skip("ladder_kernels_match_the_oracle") else { return };
    for (what, a, b) in cases() {
        check(&gpu, what, &a, &b, &LadderKernel::LADDER);
    }
}

#[test]
fn every_k4_and_kp_grid_point_matches_the_oracle() {
    let Some(gpu) = gpu_or_skip("every_k4_and_kp_grid_point_matches_the_oracle") else { return };
    let kernels: Vec<LadderKernel> = SPGEMM_K4_GRID
        .iter()
        .flat_map(|&(block, tile)| [LadderKernel::K4 { block, tile }, LadderKernel::PrefixSum { block, tile }])
        .collect();
    let a = gen::power_law(200, 300, 12.0, 1.5, 21);
    let b = gen::uniform_random(300, 5000, 0.004, 22);
    check(&gpu, "power-law 200x300 * random 300x5000", &a, &b, &kernels);
}

#[test]
fn ladder_on_real_matrices() {
    let Some(gpu) = gpu_or_skip("ladder_on_real_matrices") else { return };
    for file in ["pores_1.mtx.gz", "lund_a.mtx.gz", "utm300.mtx.gz", "west0479.mtx.gz", "well1850.mtx.gz"] {
        let a = tilesparse::suite::load_matrix(&common::data_path(file)).unwrap();
        check(&gpu, file, &a, &square_product(&a), &LadderKernel::LADDER);
    }
}

#[test]
fn shape_mismatch_is_an_error() {
    let Some(gpu) = gpu_or_skip("shape_mismatch_is_an_error") else { return };
    let a = DeviceCsr::upload(&gpu, gen::uniform_random(10, 20, 0.2, 1).view()).unwrap();
    let b = DeviceCsr::upload(&gpu, gen::uniform_random(21, 5, 0.2, 2).view()).unwrap();
    assert!(matches!(spgemm_ladder(&gpu, &a, &b, LadderKernel::K3), Err(Error::ShapeMismatch(_))));
    assert!(matches!(DeviceCoo::for_product(&gpu, &a, &b), Err(Error::ShapeMismatch(_))));
}

/// Small enough for compute-sanitizer in run-all.sh --sanitize; every ladder kernel and the conversion.
#[test]
fn sanitizer_spgemm_small() {
    let Some(gpu) = gpu_or_skip("sanitizer_spgemm_small") else { return };
    let a = gen::with_empty_rows(&gen::power_law(60, 50, 6.0, 1.5, 31), 0.2, 32);
    let b = gen::uniform_random(50, 300, 0.05, 33);
    let mut kernels = LadderKernel::LADDER.to_vec();
    kernels.extend([LadderKernel::K4 { block: 64, tile: 64 }, LadderKernel::PrefixSum { block: 1024, tile: 4096 }]);
    check(&gpu, "sanitizer", &a, &b, &kernels);
}

fn bound_of(a: &CsMat<f32>, b: &CsMat<f32>) -> u64 {
    output_nnz_bound(a.indptr().raw_storage(), a.indices(), b.indptr().raw_storage(), b.cols())
}

#[test]
fn output_bound_holds_and_is_tight_where_it_should_be() {
    for (what, a, b) in cases() {
        let nnz = oracle::spgemm(a.view(), b.view()).nnz() as u64;
        assert!(bound_of(&a, &b) >= nnz, "{what}: bound {} < nnz {nnz}", bound_of(&a, &b));
    }
    // A permutation times anything: exactly nnz(B) products, no collisions.
    let p = from_triplets(3, 3, &[(0, 2, 1.0), (1, 0, 1.0), (2, 1, 1.0)]);
    let b = gen::uniform_random(3, 40, 0.3, 1);
    assert_eq!(bound_of(&p, &b), b.nnz() as u64);
    // A row with more products than B has columns is capped at B's columns.
    let full = from_triplets(1, 3, &[(0, 0, 1.0), (0, 1, 1.0), (0, 2, 1.0)]);
    let dense_b = from_triplets(3, 2, &[(0, 0, 1.0), (0, 1, 1.0), (1, 0, 1.0), (1, 1, 1.0), (2, 0, 1.0), (2, 1, 1.0)]);
    assert_eq!(bound_of(&full, &dense_b), 2);
    assert_eq!(bound_of(&CsMat::zero((4, 5)), &dense_b.transpose_view().to_csr()), 0);
}

/// `SPGEMM_K4_GRID` and the X-macro that instantiates the kernels are the grid's two copies: they must agree.
#[test]
fn the_rust_grid_matches_the_cuda_x_macro() {
    let cu = include_str!("../cuda/spgemm/spgemm.cu");
    let start = cu.find("#define TILESPARSE_SPGEMM_K4_GRID(X)").expect("the X-macro is in spgemm.cu");
    let body = &cu[start..start + cu[start..].find("\n\n").expect("the X-macro ends with a blank line")];
    let points: Vec<(u32, u32)> = body
        .split("X(")
        .skip(1) // the macro's name, before the first point
        .map(|p| {
            let (block, rest) = p.split_once(',').unwrap();
            let tile = rest.split_once(')').unwrap().0;
            (block.trim().parse().unwrap(), tile.trim().parse().unwrap())
        })
        .collect();
    assert_eq!(points, SPGEMM_K4_GRID);
}

#[test]
fn kernel_names_parse_and_the_grid_is_complete() {
    assert_eq!(SPGEMM_K4_GRID.len(), 35);
    for block in [64, 128, 256, 512, 1024] {
        for tile in [64, 128, 256, 512, 1024, 2048, 4096] {
            assert!(SPGEMM_K4_GRID.contains(&(block, tile)), "({block}, {tile}) missing");
        }
    }
    for &(block, tile) in SPGEMM_K4_GRID {
        for k in [LadderKernel::K4 { block, tile }, LadderKernel::PrefixSum { block, tile }] {
            assert_eq!(k.to_string().parse::<LadderKernel>().unwrap(), k);
            assert!(k.kernel_name().starts_with("spgemm_k"), "{}", k.kernel_name());
        }
    }
    for k in LadderKernel::LADDER {
        assert_eq!(k.to_string().parse::<LadderKernel>().unwrap(), k);
    }
    assert_eq!("k4".parse::<LadderKernel>().unwrap(), LadderKernel::LADDER[4]);
    assert_eq!("kp".parse::<LadderKernel>().unwrap(), LadderKernel::LADDER[5]);
    assert!(matches!("k4_b100_t64".parse::<LadderKernel>(), Err(Error::NotCompiled { .. })));
    assert!(matches!("k9".parse::<LadderKernel>(), Err(Error::Usage(_))));
}
