demo --threads 2
