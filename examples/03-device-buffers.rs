//! 03: multiply operands that are already on the device, without copying them through the host: buffers made on
//! the handle's stream (here by uploads; in an application, by its own kernels) are wrapped, used and given back.
//! `cargo run --release --example 03-device-buffers`

use tilesparse::{gen, spmm_auto, DeviceCsr, DeviceDense, Gpu};

fn main() -> tilesparse::Result<()> {
    let (m, k, n) = (384, 1536, 256);
    let a = gen::pruned_dense(m, k, 0.9, 3); // a weight matrix at 90% sparsity
    let b = gen::dense_matrix(k, n, 4);
    let gpu = Gpu::new(0)?;
    let stream = gpu.stream();
    let copy = |what| move |source| tilesparse::Error::Driver { what, source };
    // The application's buffers, on the stream every tilesparse operation of `gpu` runs on.
    let offsets: Vec<i32> = a.indptr().raw_storage().iter().map(|&x| x as i32).collect();
    let columns: Vec<i32> = a.indices().iter().map(|&x| x as i32).collect();
    let row_offsets = stream.clone_htod(&offsets).map_err(copy("row offsets"))?;
    let column_indices = stream.clone_htod(&columns).map_err(copy("column indices"))?;
    let values = stream.clone_htod(a.data()).map_err(copy("values"))?;
    let dense = stream.clone_htod(&b).map_err(copy("B"))?;
    let out = stream.alloc_zeros::<f32>(m * n).map_err(copy("C"))?;

    // Wrapped, not copied: the CSR structure is checked once (one download of the indices), the values stay put.
    let a_dev = DeviceCsr::from_device(&gpu, m, k, row_offsets, column_indices, values)?;
    let b_dev = DeviceDense::from_slice(&gpu, k, n, dense)?;
    let mut c_dev = DeviceDense::from_slice(&gpu, m, n, out)?;
    let kernel = spmm_auto(&gpu, &a_dev, &b_dev, &mut c_dev)?;

    // C's buffer goes back to the application; here it is read on the host to check one element.
    let c = stream.clone_dtoh(&c_dev.into_slice()).map_err(copy("C back"))?;
    let row = a.outer_view(7).expect("row 7");
    let c_7_5: f32 = row.iter().map(|(j, v)| v * b[j * n + 5]).sum();
    println!("{kernel}: C[7][5] = {} (CPU: {c_7_5})", c[7 * n + 5]);
    Ok(())
}
