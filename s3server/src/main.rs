//! `lab-s3server DIR ADDRESS BUCKET`: serves an S3 API over `DIR` on
//! `ADDRESS` with the bucket `BUCKET`, printing the environment that
//! reaches it, until interrupted (`make run-cluster`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, address, bucket] = args.as_slice() else {
        eprintln!("usage: lab-s3server DIR ADDRESS BUCKET");
        return ExitCode::from(2);
    };
    let address = match address.parse() {
        Ok(address) => address,
        Err(e) => {
            eprintln!("lab-s3server: {address}: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match lab_s3server::S3Server::start(dir.as_ref(), bucket, address) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("lab-s3server: {dir} on {address}: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (name, value) in server.env() {
        println!("{name}={value}");
    }
    // Serves until the process is ended; its thread runs the server.
    loop {
        std::thread::park();
    }
}
