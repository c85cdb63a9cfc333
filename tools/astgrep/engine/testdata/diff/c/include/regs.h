/* Register layouts of the control block, padding included. */
#ifndef REGS_H
#define REGS_H

#include <stdint.h>

struct ctrl_reg {
	uint32_t enable : 1;
	uint32_t mode : 3;
	uint32_t : 4; /* reserved */
	uint32_t divider : 8;
	uint32_t :16;
};

struct status_reg {
	unsigned int ready : 1;
	unsigned int error : 1;
	unsigned : 6;
	unsigned int count : 8;
	unsigned int :0;
	unsigned char code;
};

union irq_reg {
	uint16_t raw;
	struct {
		uint16_t line : 5;
		uint16_t : 3;
		uint16_t level : 8;
	} bits;
};

#endif /* REGS_H */
