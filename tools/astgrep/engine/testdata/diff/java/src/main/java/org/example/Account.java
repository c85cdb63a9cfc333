package org.example;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

public final class Account {
    private static final BigDecimal LIMIT = new BigDecimal("10000");

    private final String id;
    private final String owner;
    private final List<Transaction> history = new ArrayList<>();
    private BigDecimal balance;
    protected final int version;

    public Account(String id, String owner) {
        this.id = Objects.requireNonNull(id);
        this.owner = owner;
        this.balance = BigDecimal.ZERO;
        this.version = 1;
    }

    public String getId() {
        return id;
    }

    public BigDecimal getBalance() {
        return balance;
    }

    public void deposit(BigDecimal amount) {
        if (amount.signum() <= 0) {
            // Deposits must be positive.
            throw new IllegalArgumentException("amount must be positive: " + amount);
        }
        if (balance.add(amount).compareTo(LIMIT) > 0) {
            throw new IllegalStateException("limit exceeded");
        }
        balance = balance.add(amount);
        history.add(new Transaction(amount));
        System.out.println("deposit " + amount);
    }

    public List<Transaction> getHistory() {
        final List<Transaction> copy = new ArrayList<>(history);
        return copy;
    }
}
