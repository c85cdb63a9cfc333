#include <string.h>
#include "packet.h"

int packet_encode(const struct packet_header *h, uint8_t *buf, size_t len)
{
	if (len < 8) {
		/* Too short for a header. */
		return -1;
	}
	memset(buf, 0, len);
	buf[0] = (uint8_t)((h->version << 4) | h->type);
	buf[1] = (uint8_t)h->flags;
	memcpy(buf + 4, &h->sequence, sizeof(h->sequence));
	return 8;
}

int packet_decode(struct packet_header *h, const uint8_t *buf, size_t len)
{
	if (len < 8) {
		return -1;
	}
	h->version = buf[0] >> 4;
	h->type = buf[0] & 0xf;
	h->flags = buf[1];
	memcpy(&h->sequence, buf + 4, sizeof(h->sequence));
	for (size_t i = 8; i < len; i++) {
		if (buf[i] == 0) {
			/* Padding. */
			h->length = (unsigned int)i;
                        break; /* indented with spaces in a tab-indented file */
		}
	}
	return 0;
}
