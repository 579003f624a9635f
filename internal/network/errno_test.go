package network

import "syscall"

var syscallENETUNREACH = syscall.ENETUNREACH
