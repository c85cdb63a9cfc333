/* Wire format of the control protocol. */
#ifndef PACKET_H
#define PACKET_H

#include <stddef.h>
#include <stdint.h>

struct packet_header {
	unsigned int version : 4;
	unsigned int type : 4;
	unsigned int flags : 8;
	unsigned int length : 16;
	uint32_t sequence;
};

struct tcp_flags {
	unsigned int fin : 1, syn : 1;
	unsigned int rst : 1;
	unsigned int psh : 1;
	unsigned char reserved : 4;
	unsigned int ack : 1;
};

typedef struct {
	unsigned int kind : 3;
	int signed_delta : 5;
	const char *name;
} field_desc;

int packet_encode(const struct packet_header *h, uint8_t *buf, size_t len);
int packet_decode(struct packet_header *h, const uint8_t *buf, size_t len);
size_t packet_size(const struct packet_header *h);

static inline int packet_is_control(const struct packet_header *h)
{
	if (h == NULL) {
		return 0;
	}
	return h->type == 1 || h->type == 2;
}

#endif
