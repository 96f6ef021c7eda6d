"""Side-by-side speed and memory benchmarks of ptm against the library a user would pick."""
