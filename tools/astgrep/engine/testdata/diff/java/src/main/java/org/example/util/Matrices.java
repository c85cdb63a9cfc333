package org.example.util;

import java.util.Arrays;
import java.util.List;

/** Loops over dense matrices and lists, in the shapes real code has. */
public final class Matrices {
    private Matrices() {}

    public static int[][] identity(int n) {
        int[][] m = new int[n][n];
        for (int i = 0; i < n; i++) {
            m[i][i] = 1;
        }
        return m;
    }

    public static long sum(int[] xs) {
        long s = 0;
        for (int i = 0; i < xs.length; i++) s += xs[i];
        return s;
    }

    public static void transpose(int[][] m) {
        for (int r = 0; r < m.length; r++) {
            for (int c = r + 1; c < m[r].length; c++) {
                int t = m[r][c];
                m[r][c] = m[c][r];
                m[c][r] = t;
            }
        }
    }

    public static void clear(int[] xs) {
        for (int i = 0; i < xs.length; i++) {
            // every cell, one by one
        }
        for (int i = 0; i < xs.length; i++) {}
        for (int i = 0; i < xs.length; i++)
            xs[i] = 0;
        for (int i = 0; i < xs.length; ++i) {
            xs[i] = -1;
        }
    }

    public static int count(List<String> names, String prefix) {
        int n = 0;
        for (int i = 0; i < names.size(); i++) {
            if (names.get(i).startsWith(prefix)) {
                n++;
            } else if (names.get(i).isEmpty()) {
                continue;
            }
        }
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) {
                n += i * j;
            }
        for (int i = 0; i < n; i++) {
            try {
                names.get(i);
            } catch (IndexOutOfBoundsException e) {
                break;
            }
        }
        for (int i = 0; i < 2; i++) {
            switch (i) {
                case 0:
                    break;
                default:
                    return n;
            }
        }
        for (int i = 0, j = n; i < j; i++) {
            n--;
        }
        while (n > 100) n /= 2;
        while (n > 10) {
            n -= 10;
        }
        return n;
    }

    public static String join(String[] parts) {
        StringBuilder sb = new StringBuilder();
        for (int k = 0; k < parts.length; k++) { sb.append(parts[k]); }
        return sb.toString() + Arrays.toString(parts);
    }
}
