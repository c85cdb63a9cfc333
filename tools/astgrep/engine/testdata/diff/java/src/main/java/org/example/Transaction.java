package org.example;

import java.math.BigDecimal;
import java.time.Instant;

public class Transaction {
    private final BigDecimal amount;
    private final Instant at;

    public Transaction(BigDecimal amount) {
        this.amount = amount;
        this.at = Instant.now();
    }

    public BigDecimal getAmount() {
        return amount;
    }

    @Override
    public String toString() {
        if (amount == null) {
            return "Transaction(?)";
        }
        return "Transaction(" + amount + " at " + at + ")";
    }
}
