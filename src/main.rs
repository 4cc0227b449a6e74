fn main() {
    println!("seismic-run: under construction");
}
