#!/bin/bash
# A stand-in for nvidia-smi on a machine without a GPU (validate.sh's GPU path).
case "$*" in
  -L) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake)";;
  *--query-gpu=name*) echo "NVIDIA H100 80GB HBM3";;
  *-lms*)
    q=${1#--query-gpu=}; echo "$q" | sed 's/,/, /g'
    while true; do
      echo "$(date '+%Y/%m/%d %H:%M:%S.%3N'), 0, 123.45, 120.00, 1000, 50, 1980"; sleep 0.2
    done;;
  *--query-gpu=*) echo "x";;
  -q) echo "fake";;
  *) echo "| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA Version: 13.0 |";;
esac
