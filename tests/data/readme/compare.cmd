compare --variants relu,gelu,swiglu,moe --steps 300 --seeds 3 --threads 2
