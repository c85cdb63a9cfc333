import React, { useState, useEffect } from 'react';

interface Props {
  readonly title: string;
  readonly items: string[];
  onSelect?: (item: string) => void;
}

const styles = { list: { margin: 0, padding: 0 }, item: { color: 'blue' } };

export function List({ title, items, onSelect }: Props) {
  const [selected, setSelected] = useState<string | null>(null);
  useEffect(() => {
    console.log('selected', selected);
  }, [selected]);
  return (
    <div className="list">
      <h2>{title}</h2>
      <ul style={styles.list}>
        {items.map((item) => (
          <li key={item} style={styles.item} onClick={() => { setSelected(item); onSelect?.(item); }}>
            {item}
          </li>
        ))}
      </ul>
    </div>
  );
}

export default function App() {
  const [items, setItems] = useState<string[]>([]);
  useEffect(() => {
    fetch('/api/items')
      .then((r) => r.json())
      .then((data) => setItems(data.items));
  }, []);
  return <List title="Items" items={items} onSelect={(i) => console.log(i)} />;
}
